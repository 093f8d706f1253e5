"""mypy over the built package (build/python/precsim, the extension's generated stub included), with
the configuration in pyproject.toml. The annotations are a promise to users' type checkers: this
holds them to the code. Exits 77 (skipped) when mypy is missing, except under CI, where
scripts/setup.sh installs the pinned version and a missing one fails."""
import os
import re
import sys


def main() -> int:
    package, config, cache = sys.argv[1:4]
    try:
        from mypy import api
    except ImportError:
        required = os.environ.get("CI") or os.environ.get("PRECSIM_REQUIRE_ORACLES") == "1"
        print("python_types_test: mypy is not installed (scripts/setup.sh pins it)", file=sys.stderr)
        return 1 if required else 77
    out, err, status = api.run(["--config-file", config, "--cache-dir", cache, package])
    sys.stdout.write(out)
    sys.stderr.write(err)
    # A run that checked almost nothing (a wrong path, an exclude gone wrong) must not pass.
    checked = re.search(r"in (\d+) source files", out)
    if status == 0 and (not checked or int(checked.group(1)) < 20):
        print(f"python_types_test: mypy checked too few files ({out.strip()!r})", file=sys.stderr)
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
