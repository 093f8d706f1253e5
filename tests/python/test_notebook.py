"""notebooks/python/from_python.ipynb runs headless on this interpreter (the venv with precsim and
torch) and writes its figure. The other notebooks (report plots on Debian's python3) are run by
report_notebooks_test."""
import json
import os
import sys

from conftest import need

HERE = os.path.dirname(os.path.abspath(__file__))


def test_from_python_notebook(tmp_path):
    need("torch")
    nbformat = need("nbformat")
    nbclient = need("nbclient")
    # A kernelspec for this interpreter: the system's "python3" spec would start /usr/bin/python3.
    spec = tmp_path / "jupyter" / "kernels" / "precsim-venv"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "precsim venv", "language": "python"}))
    os.environ["JUPYTER_PATH"] = str(tmp_path / "jupyter")
    # The kernel imports the same precsim as this test (the build tree's, or an installed one).
    import precsim
    os.environ["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(precsim.__file__)))
    os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    nb = nbformat.read(os.path.join(HERE, "..", "..", "notebooks", "python", "from_python.ipynb"), as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="precsim-venv",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "largest loss difference from the fp32 twin" in printed and "ranks identical True" in printed
