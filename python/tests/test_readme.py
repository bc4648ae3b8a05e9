"""The README's Python example, run as written."""

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_readme_example(capsys):
    text = README.read_text()
    section = text[text.index("\n## Python\n"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    exec(compile(code, "README.md", "exec"), {"__name__": "readme_example"})
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "[(0, 0), (5, 50), (10, 20), (20, 40)]",
        "980 1960",
        "990 1980",
        "{b'acct:a': b'70', b'acct:b': b'30'}",
    ]
