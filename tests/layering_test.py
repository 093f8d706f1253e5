#!/usr/bin/env python3
"""The dependency rules of sim/ (docs/ARCHITECTURE.md), read from the #include lines.

Every file under sim/include/precsim/sim/<group>/ and sim/src/<group>/ belongs to its group and may
include headers of the groups listed for it in ALLOWED, of formats/ always, of reports/ only where
REPORTS says, and of the GPU ABI only in hw. Nothing but the front-ends (sim/cli, sim/python) and
the tests and benchmarks includes experiment. Public headers of sim/ keep Eigen and Boost out (they
cost every includer's compile time). A header that needs only JSON types includes json_fwd.hpp.
JSON stays at the edges: a header of sim/ names nlohmann::json only if it is a JSON edge (a
*_json.h reader and writer, the report builders in JSON_EDGES, or a group whose every product is a
report document: JSON_GROUPS). The front-ends (FRONT_ENDS) include public headers and their own,
never each other's, never a group's private sim/src header, and never the GPU ABI.

  layering_test.py ROOT            checks the tree at ROOT (exit 1 with every violation listed)
  layering_test.py --self-test ROOT  copies ROOT's sim/, plants one wrong include per rule, and
                                   checks that each one is caught
"""
import os
import re
import shutil
import sys
import tempfile

GROUPS = ["core", "accum", "data", "model", "parallel", "analysis", "train", "hw", "experiment"]
# Which groups each group may include (its own always).
ALLOWED = {
    "core": set(),
    "accum": {"core"},
    "data": {"core"},
    "model": {"core", "accum", "data"},
    "parallel": {"core"},
    "analysis": {"core", "accum"},
    "train": {"core", "accum", "data", "model", "parallel"},
    "hw": {"core", "accum", "data", "model", "parallel", "analysis", "train"},
    "experiment": {"core", "accum", "data", "model", "parallel", "analysis", "train", "hw"},
}
REPORTS = {"core", "data", "analysis", "hw", "experiment"}
GPU_ABI = {"hw"}
# Report builders and readers outside the *_json.h names: each reads or writes one document.
JSON_EDGES = {"strict_json.h", "tensor_report.h", "seed_report.h"}
# Groups whose public functions produce report documents (device reports, comparisons, sweeps).
JSON_GROUPS = {"analysis", "hw", "experiment"}
FRONT_ENDS = {"cli": "sim/cli", "python": "sim/python/src"}
JSON_NAME = re.compile(r"\bnlohmann::(ordered_)?json\b")
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
SIM = re.compile(r"^precsim/sim/([a-z_]+)/")


def group_files(root):
    """(group, path) of every source and header of sim/'s groups."""
    for base in ("sim/include/precsim/sim", "sim/src"):
        top = os.path.join(root, base)
        for name in sorted(os.listdir(top)):
            path = os.path.join(top, name)
            if not os.path.isdir(path):
                yield None, path  # a file outside every group
                continue
            for dirpath, _, files in os.walk(path):
                for f in sorted(files):
                    if f.endswith((".h", ".cpp")):
                        yield name, os.path.join(dirpath, f)


def violations(root):
    out = []
    for group, path in group_files(root):
        rel = os.path.relpath(path, root)
        if group not in ALLOWED:
            out.append(f"{rel}: not in a group; sim/ code lives in one of {', '.join(GROUPS)}")
            continue
        text = open(path, encoding="utf-8").read()
        public = "/include/" in rel
        for inc in INCLUDE.findall(text):
            m = SIM.match(inc)
            if m:
                g = m.group(1)
                if g not in ALLOWED:
                    out.append(f"{rel}: includes {inc}, which is in no group")
                elif g != group and g not in ALLOWED[group]:
                    allowed = ", ".join(sorted(ALLOWED[group])) or "no other group"
                    out.append(f"{rel}: {group} may not include {g} ({inc}); {group} may include {allowed}")
            elif inc.startswith("precsim/sim/"):
                out.append(f"{rel}: includes {inc}, outside every group")
            elif inc.startswith("precsim/reports/") and group not in REPORTS:
                out.append(f"{rel}: {group} may not include reports ({inc}); only {', '.join(sorted(REPORTS))} do")
            elif inc.startswith("precsim/gpu/") and group not in GPU_ABI:
                out.append(f"{rel}: {group} may not include the GPU ABI ({inc}); only hw does")
            elif public and (inc.startswith("Eigen/") or inc.startswith("boost/")):
                out.append(f"{rel}: a public header includes {inc}; keep Eigen and Boost in .cpp files")
        if public and "<nlohmann/json.hpp>" in text and not needs_full_json(text):
            out.append(f"{rel}: includes nlohmann/json.hpp but uses JSON only by name; include nlohmann/json_fwd.hpp")
        if rel.endswith(".h") and json_in_signatures(text) and not json_edge(group, rel):
            out.append(f"{rel}: names nlohmann::json outside the JSON edges; take and return typed values here "
                       f"and read or write JSON in a *_json.h edge")
    return out + front_end_violations(root)


def json_in_signatures(text):
    return bool(JSON_NAME.search(re.sub(r"//.*", "", text)))


def json_edge(group, rel):
    name = os.path.basename(rel)
    return name.endswith("_json.h") or name in JSON_EDGES or group in JSON_GROUPS


QUOTED = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def front_end_violations(root):
    """The CLI and the bindings: public headers, their own, nothing private, neither the other's."""
    out = []
    for name, base in FRONT_ENDS.items():
        top = os.path.join(root, base)
        if not os.path.isdir(top):
            continue
        own = set(os.listdir(top))
        for f in sorted(own):
            if not f.endswith((".h", ".cpp")):
                continue
            rel = os.path.join(base, f)
            text = open(os.path.join(top, f), encoding="utf-8").read()
            for inc in INCLUDE.findall(text):
                if inc.startswith("precsim/gpu/"):
                    out.append(f"{rel}: {name} may not include the GPU ABI ({inc}); only hw does")
            for inc in QUOTED.findall(text):
                if inc.startswith("precsim/gpu/"):
                    continue
                if ".." in inc or "src/" in inc:
                    out.append(f"{rel}: {name} includes {inc}; front-ends include public headers and their own")
                elif not inc.startswith("precsim/") and inc not in own:
                    out.append(f"{rel}: {name} includes {inc}, which is neither public nor its own")
    return out


def needs_full_json(text):
    """Whether a header uses nlohmann::json beyond naming it (a default argument, a member of
    json type, inline code, a macro of the library)."""
    body = re.sub(r"//.*", "", text)
    return bool(re.search(r"json\s+\w+\s*[;{=]|json\s+\w+\s*\(\)\s*;|= *nlohmann::json|NLOHMANN_|json::|"
                          r"std::(vector|map|function|optional|pair)<[^;]*json|json\s*\{|\bjson&\s*\w+\s*=",
                          body))


def self_test(root):
    """Plants one violation of each rule in a copy of the tree; each must be reported."""
    plants = [
        ("sim/src/model/layers.cpp", '#include "precsim/sim/train/recipe.h"\n', "model may not include train"),
        ("sim/src/train/recipe.cpp", '#include "precsim/sim/experiment/runner.h"\n', "train may not include experiment"),
        ("sim/src/accum/gemm.cpp", '#include "precsim/reports/report.h"\n', "accum may not include reports"),
        ("sim/src/parallel/split.cpp", '#include "precsim/gpu/gpu_api.h"\n', "only hw does"),
        ("sim/include/precsim/sim/accum/gemm.h", "#include <Eigen/Dense>\n", "keep Eigen and Boost"),
        ("sim/include/precsim/sim/train/recipe.h", "nlohmann::json recipe_dump(const Recipe&);\n",
         "outside the JSON edges"),
        ("sim/include/precsim/sim/model/numerics.h", "void read(const nlohmann::json&);\n", "outside the JSON edges"),
        ("sim/src/model/layers.cpp", '#include "precsim/sim/experiment/runner.h"\n', "model may not include experiment"),
        ("sim/cli/main.cpp", '#include "precsim/gpu/backend_abi.h"\n', "cli may not include the GPU ABI"),
        ("sim/cli/main.cpp", '#include "py_common.h"\n', "neither public nor its own"),
        ("sim/python/src/module.cpp", '#include "../../src/experiment/seed_run.h"\n', "front-ends include public"),
        ("sim/python/src/module.cpp", '#include "train_runner.h"\n', "neither public nor its own"),
    ]
    failed = 0
    for rel, line, expect in plants:
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(os.path.join(root, "sim"), os.path.join(tmp, "sim"),
                            ignore=shutil.ignore_patterns("__pycache__"))
            path = os.path.join(tmp, rel)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            with open(path, "w", encoding="utf-8") as f:
                f.write(line + text)
            found = [v for v in violations(tmp) if expect in v]
            print(f"{'caught' if found else 'MISSED'}: {line.strip()} in {rel}")
            failed += not found
    return failed


def main():
    args = sys.argv[1:]
    if args and args[0] == "--self-test":
        root = args[1]
        clean = violations(root)
        if clean:
            print("the tree itself breaks the rules:\n  " + "\n  ".join(clean))
            return 1
        return 1 if self_test(root) else 0
    root = args[0]
    found = violations(root)
    for v in found:
        print(v)
    n = sum(1 for _ in group_files(root))
    print(f"{n} files in {len(GROUPS)} groups; {len(found)} violations")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
