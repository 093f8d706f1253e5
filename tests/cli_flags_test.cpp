// Flags mean the same thing in every command, help texts carry their grammars, and no command
// answers a bad flag or value with its help: every command is found by walking `precsim --help`,
// so a new command is checked without being named here.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../support/cli_run.h"
#include "precsim/sim/train/recipe.h"

namespace precsim {
namespace {

using test_support::CliSplitRun;

struct Option {
  std::vector<std::string> names;  // "-f", "--format"
  std::string desc;
};

// The "Options:" of a --help text. An option line starts "  -"; its description starts at column
// 30 (CLI11's name column), or on the next, indented, line when the name is longer.
std::vector<Option> parse_options(const std::string& help) {
  std::vector<Option> out;
  std::istringstream in(help);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line == "Options:") inside = true;
    if (!inside) continue;
    if (line.empty() || line == "Subcommands:") break;
    if (line.starts_with("  -")) {
      Option o;
      const std::string spec = line.substr(2, line.find(' ', 2) - 2);
      std::stringstream names(spec);
      for (std::string n; std::getline(names, n, ',');) o.names.push_back(n);
      if (line.size() > 30 && line[29] == ' ' && line[30] != ' ') o.desc = line.substr(30);
      out.push_back(o);
    } else if (!out.empty() && out.back().desc.empty()) {
      out.back().desc = line.substr(line.find_first_not_of(' '));
    }
  }
  return out;
}

// The subcommand names of a --help text.
std::vector<std::string> parse_subcommands(const std::string& help) {
  std::vector<std::string> out;
  const size_t at = help.find("\nSubcommands:\n");
  if (at == std::string::npos) return out;
  std::istringstream in(help.substr(at + 14));
  for (std::string line; std::getline(in, line) && line.starts_with("  ");) out.push_back(line.substr(2, line.find(' ', 2) - 2));
  return out;
}

class CliFlags : public test_support::CliTempDirTest {
 protected:
  CliSplitRun run(const std::string& args) const { return run_split(args); }
  std::string help(const std::string& command) const {
    const CliSplitRun r = run(command + " --help");
    EXPECT_EQ(r.rc, 0) << command << "\n" << r.err;
    return r.out;
  }
  // Every command, groups included ("report", then "report summary", ...), from the helps.
  std::vector<std::string> commands() const {
    std::vector<std::string> out, todo = {""};
    while (!todo.empty()) {
      const std::string c = todo.back();
      todo.pop_back();
      for (const auto& sub : parse_subcommands(help(c))) {
        const std::string name = c.empty() ? sub : c + " " + sub;
        out.push_back(name);
        todo.push_back(name);
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  bool is_group(const std::string& c) const { return !parse_subcommands(help(c)).empty(); }
  // A usage error: exit 2, one short message that starts alike and names `what`, no help.
  void expect_usage_error(const std::string& args, const std::vector<std::string>& what) const {
    const CliSplitRun r = run(args);
    EXPECT_EQ(r.rc, 2) << args << "\n" << r.err;
    EXPECT_TRUE(r.err.starts_with("precsim: error: ")) << args << "\n" << r.err;
    for (const auto& w : what) EXPECT_NE(r.err.find(w), std::string::npos) << args << ": no '" << w << "' in\n" << r.err;
    for (const char* dump : {"Usage:", "Options:", "Subcommands:", "Run with --help"})
      EXPECT_EQ(r.err.find(dump), std::string::npos) << args << ": the help on an error\n" << r.err;
    EXPECT_LE(std::count(r.err.begin(), r.err.end(), '\n'), 2) << args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << args << "\n" << r.out;
  }
};

TEST_F(CliFlags, SharedFlagsMeanTheSameInEveryCommand) {
  const auto all = commands();
  ASSERT_GE(all.size(), 20u);
  // long name -> description -> commands
  std::map<std::string, std::map<std::string, std::vector<std::string>>> seen;
  for (const auto& c : all) {
    if (is_group(c)) continue;
    std::set<std::string> names;
    for (const auto& o : parse_options(help(c))) {
      for (const auto& n : o.names) {
        names.insert(n);
        if (n.starts_with("--")) seen[n][o.desc].push_back(c);
      }
      const auto has = [&](const char* n) { return std::find(o.names.begin(), o.names.end(), n) != o.names.end(); };
      // -f is the format(s) a command works in, and --format/--formats always have it.
      if (has("-f") || has("--format") || has("--formats"))
        EXPECT_TRUE(has("-f") && (has("--format") || has("--formats"))) << c << ": " << o.desc;
      for (const auto& n : o.names) {
        // --out is the JSON report (--out-dir a folder of them); --output an array; no other --out*.
        if (n.starts_with("--out-") || n.starts_with("--output-"))
          EXPECT_TRUE(n == "--out-dir" || n == "--output-format") << c << " " << n;
        if (n == "--output") EXPECT_NE(o.desc.find(".npy"), std::string::npos) << c << ": " << o.desc;
        if (n == "--out") EXPECT_EQ(o.desc, "write the JSON report to FILE (atomically)") << c;
        if (n == "--seed") EXPECT_TRUE(o.desc.starts_with("seed of every random draw: ")) << c << ": " << o.desc;
      }
    }
    for (const char* everywhere : {"--threads", "--quiet", "-q", "--progress", "--help"})
      EXPECT_TRUE(names.count(everywhere)) << c << " has no " << everywhere;
  }
  // One description per shared flag, whichever command has it.
  for (const char* shared : {"--out", "--json", "--deterministic", "--threads", "--quiet", "--progress", "--steps",
                             "--seeds", "--seed", "--config", "--experiment", "--jsonl"}) {
    if (std::string(shared) == "--seed") continue;  // its tail names the draws, checked above
    const auto& descs = seen[shared];
    EXPECT_GE(descs.size(), 1u) << shared;
    if (descs.size() > 1) {
      std::string list;
      for (const auto& [d, cs] : descs) list += "\n  " + cs.front() + " (+" + std::to_string(cs.size() - 1) + "): " + d;
      ADD_FAILURE() << shared << " is described " << descs.size() << " ways:" << list;
    }
  }
  EXPECT_GE(seen["--seed"].size(), 4u) << "quantize, analyze, gemm, allreduce, train... each name what they seed";
  EXPECT_GE(seen["--threads"].begin()->second.size(), all.size() - 2) << "every command but the groups";
}

// Help texts give the grammars (model specs, scheme options, check rules, distributions), not a
// pointer into the sources.
TEST_F(CliFlags, HelpCarriesTheGrammars) {
  std::string every;
  for (const auto& c : commands()) every += help(c);
  every += help("");
  const std::regex source(R"((\w+\.(h|hpp|cpp)\b)|precsim::|\bheaders?\b)");
  std::smatch m;
  EXPECT_FALSE(std::regex_search(every, m, source)) << "help points into the sources: " << m.str();
  const auto option = [&](const std::string& c, const std::string& name) {
    for (const auto& o : parse_options(help(c)))
      if (std::find(o.names.begin(), o.names.end(), name) != o.names.end()) return o.desc;
    ADD_FAILURE() << c << " has no " << name;
    return std::string();
  };
  for (const std::string c : {"dot", "gemm"}) {
    const std::string d = option(c, "--model");
    for (const char* part : {"KIND[:key=value...]", "acc=FORMAT", "n=INT", "MODE = nearest-even|", "splitk_scheme=compute|output|inplace"})
      EXPECT_NE(d.find(part), std::string::npos) << c << " --model: no " << part;
  }
  for (const auto& [c, name] : std::vector<std::pair<std::string, std::string>>{{"quantize", "--format"}, {"analyze", "--formats"}})
    for (const char* part : {"mxfp4", "nvfp4", "tile128", ":rule=floor|ceil|even|rceil", ":block=N"})
      EXPECT_NE(option(c, name).find(part), std::string::npos) << c << " " << name << ": no " << part;
  EXPECT_NE(option("quantize", "--format").find("eXmY[:bias=B][:nosub]"), std::string::npos);
  for (const std::string c : {"analyze", "gemm"})
    EXPECT_NE(option(c, "--dist").find("student-t[:df=N,scale=S]"), std::string::npos) << c;
  const std::string rules = option("report check", "--rules");
  for (const char* part : {"exact|bitwise|ulps|tolerance|statistical|ignore", "allow_config", "reduce"})
    EXPECT_NE(rules.find(part), std::string::npos) << "--rules: no " << part;
}

// An unknown flag on any command: one line naming it (and the command's options), no help.
TEST_F(CliFlags, UnknownFlagOnEveryCommand) {
  for (const auto& c : commands()) expect_usage_error(c + " --no-such-flag", {"--no-such-flag"});
  expect_usage_error("--no-such-flag formats", {"--no-such-flag"});
  expect_usage_error("report summary x.json --no-such-flag", {"--no-such-flag", "options of 'precsim report summary': --help, --rows"});
  expect_usage_error("report", {"give a command of 'precsim report': summary, diff"});
  expect_usage_error("gpu nosuch", {"unknown command 'nosuch' of 'precsim gpu'", "info, gemm, probe"});
}

// "precsim help CMD" is "precsim CMD --help", for every command and group; "help" alone is the
// top help; an unknown command is one error naming the commands.
TEST_F(CliFlags, HelpCommandPrintsTheCommandsHelp) {
  for (const auto& c : commands()) {
    const CliSplitRun r = run("help " + c);
    EXPECT_EQ(r.rc, 0) << c << "\n" << r.err;
    EXPECT_EQ(r.out, help(c)) << c;
    EXPECT_NE(r.out.find("\nUsage: " + c + " "), std::string::npos) << r.out;
  }
  EXPECT_EQ(run("help").out, help(""));
  EXPECT_NE(help("").find("Subcommands:\n  formats"), std::string::npos);
  expect_usage_error("help nosuch", {"unknown command 'nosuch'", "commands: formats, quantize, analyze"});
  expect_usage_error("help report nosuch", {"unknown command 'nosuch' of 'precsim report'", "summary, diff"});
}

// train --help ends with every recipe preset and what it does, one aligned line each, so that
// --recipes can be chosen from the help alone.
TEST_F(CliFlags, TrainHelpListsTheRecipePresets) {
  const std::string h = help("train");
  const std::string head = "\nRecipe presets (--recipes):\n";
  const size_t at = h.find(head);
  ASSERT_NE(at, std::string::npos) << h;
  std::istringstream table(h.substr(at + head.size()));
  std::vector<std::string> lines;
  for (std::string line; std::getline(table, line) && !line.empty();) lines.push_back(line);
  const auto presets = recipe_presets();
  ASSERT_EQ(lines.size(), presets.size()) << h.substr(at);
  size_t doc_column = 0;
  for (size_t i = 0; i < presets.size(); ++i) {
    const std::string name(presets[i].name), doc(presets[i].doc);
    EXPECT_TRUE(lines[i].starts_with("  " + name + " ")) << lines[i];
    EXPECT_TRUE(lines[i].ends_with("  " + doc)) << lines[i];
    if (i == 0) doc_column = lines[i].size() - doc.size();
    EXPECT_EQ(lines[i].size() - doc.size(), doc_column) << "not aligned: " << lines[i];
  }
  EXPECT_GE(presets.size(), 20u);
  EXPECT_EQ(presets[0].name, "fp32");
}

// CLI::Range's "Value -5 not in range 1 to 1099511627776" is said with the option, the value and
// what is allowed, powers of two as such.
TEST_F(CliFlags, RangeErrorsNameTheOptionAndWhatIsAllowed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"demo --steps -5", "--steps -5 is out of range; allowed: 1 to 2^40"},
      {"demo --steps abc", "--steps abc is not a number; allowed: 1 to 2^40"},
      {"formats --threads 1.5", "--threads 1.5 is not an integer; allowed: 1 to 1024"},
      {"formats --threads 2000", "--threads 2000 is out of range; allowed: 1 to 1024"},
      {"train --recipes fp32 --batch 0", "--batch 0 is out of range; allowed: 1 to 2^24"},
      {"train --recipes fp32 --seed 99999999999999999999",
       "--seed 99999999999999999999 is out of range; allowed: 0 to 2^62"},
      {"report check --baseline a.json b.json --rtol -1", "--rtol -1 is out of range; allowed: 0 or more"},
      {"gpu gemm --k 0x20000", "--k 0x20000 is out of range; allowed: 1 to 65536"},
  };
  for (const auto& [args, says] : cases) {
    const CliSplitRun r = run(args);
    EXPECT_EQ(r.rc, 2) << args;
    EXPECT_EQ(r.err, "precsim: error: " + says + "\n") << args;
  }
}

// Per command, a missing value and a bad value: exit 2, the option and the value named, what is
// allowed listed, and no help. Every command of the help has a row.
TEST_F(CliFlags, NoCommandPrintsItsHelpOnAnError) {
  struct Case {
    std::string missing;                 // an option given last, without its value
    std::string bad;                     // a command line with one bad value
    std::vector<std::string> says;       // the bad value and what is allowed
  };
  const std::map<std::string, Case> cases = {
      {"formats", {"--threads", "formats --threads 0", {"--threads", "0", "1 to 1024"}}},
      {"quantize", {"-f", "quantize -f e9m9x 1", {"e9m9x", "known formats: fp64"}}},
      {"analyze", {"--sort", "analyze --dist normal -f e4m3 --sort best", {"best", "allowed: qsnr, flushed, mse"}}},
      {"dot", {"--model", "dot --model h99 --a 1 --b 1", {"h99", "presets: fp32-seq"}}},
      {"mma", {"--model", "mma --model h99 --a a.npy --b b.npy", {"h99", "presets: fp32-seq"}}},
      {"models", {"--arch", "models --arch pascal", {"pascal", "allowed: volta"}}},
      {"gemm", {"--c-format", "gemm --m 4 --n 4 --k 4 --c-format e9m9x", {"--c-format", "e9m9x", "known formats"}}},
      {"allreduce", {"-a", "allreduce -a spiral", {"spiral", "allowed: ring, tree, naive, fp32-accumulate"}}},
      {"train", {"--recipes", "train --recipes fp99", {"fp99", "known recipes: fp32, bf16-amp"}}},
      {"demo", {"--steps", "demo --steps 0", {"--steps", "0", "1 to"}}},
      {"attribute", {"--unit", "attribute --experiment tiny-gpt --recipe mxfp4 --unit tensor", {"tensor", "allowed: role, gemm, layer"}}},
      {"search", {"--budget", "search --experiment tiny-gpt -f e2m1 --budget 6 --recipe fp99", {"fp99", "known recipes"}}},
      {"sweep", {"--executor", "sweep plan.json --executor slurm", {"slurm", "auto,local,mpi"}}},
      {"gpu info", {"--progress", "gpu info --progress fancy", {"--progress", "fancy", "none,lines,bar"}}},
      {"gpu gemm", {"--threads", "gpu gemm --threads 2000", {"2000", "1 to 1024"}}},
      {"gpu probe", {"--progress", "gpu probe --progress fancy", {"fancy", "none,lines,bar"}}},
      {"report summary", {"--rows", "report summary x.json --rows 0", {"--rows", "0", "1 to"}}},
      {"report diff", {"--threads", "report diff a.json b.json --threads 0", {"0", "1 to 1024"}}},
      {"report compare", {"--metric", "report compare x.json --a a --b b --progress loud", {"loud", "none,lines,bar"}}},
      {"report check", {"--rtol", "report check --baseline a.json b.json --rtol -1", {"--rtol", "-1"}}},
      {"report validate", {"--progress", "report validate x.json --progress loud", {"loud", "none,lines,bar"}}},
      {"report export", {"--csv", "report export x.json --threads 0", {"0", "1 to 1024"}}},
  };
  for (const auto& c : commands()) {
    if (is_group(c)) continue;
    const auto it = cases.find(c);
    if (it == cases.end()) {
      ADD_FAILURE() << "no error case for '" << c << "'";
      continue;
    }
    expect_usage_error(c + " " + it->second.missing, {it->second.missing, "missing"});
    expect_usage_error(it->second.bad, it->second.says);
  }
}

}  // namespace
}  // namespace precsim
