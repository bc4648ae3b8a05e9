#!/usr/bin/env python3
"""Lists every function definition in the library (src/) and the server
(server/) longer than a limit (default 80 lines), and exits 1 if there is one.

A function's length is counted from the first line of its declaration (the
return type, or `template`) to its closing brace, blank and comment lines
included: what a reader scrolls through. A lambda or a local class inside a
function counts toward that function.

How it finds functions, without compiling: each file is read as tokens with
comments, string and character literals and preprocessor lines removed; a
`{` at namespace or class scope opens a function body when the text before
it (back to the previous `;`, `{` or `}` of that scope) is a declarator with
a parameter list and no initializer (`=` outside parentheses). Namespace,
class, struct, union and `extern "C"` bodies are entered; enum bodies and
initializer braces are skipped. A constructor's member initializers written
with braces (`a_{x}`) are recognised by the identifier before the brace.
Code that the preprocessor would hide (`#if 0`) is read like any other.

  scripts/check-function-length.py [--max N] [--exclude DIR]... [PATH...]

PATHs default to src and server (relative to the repository root); an
--exclude DIR drops the files under it (repeatable). Output: one line per
long function, `file:line: name: N lines`, longest first. A function on
the ALLOWED list below is reported (marked "allowed") but does not fail the
check; an entry that no longer names a long function is reported as stale,
to be removed. scripts/test.sh runs this check in its first step.
"""
import argparse
import os
import re
import sys

CONTAINER_WORDS = {"namespace", "class", "struct", "union"}
SKIP_WORDS = {"enum"}
SOURCE_EXT = (".cc", ".h", ".cpp", ".hpp")
# Words that take a parenthesised argument in a declarator but are not the
# function's name.
NOT_A_NAME = {"__attribute__", "alignas", "decltype", "noexcept", "requires", "throw",
              "__declspec", "static_assert", "sizeof", "alignof"}

# Functions over the limit that do not fail the check, as (file, name),
# each with who removes it and why it is here. Keep it empty: a new long
# function is split into named steps instead of listed here.
ALLOWED: set = set()  # (path, qualified name); empty: every function fits

TOKEN = re.compile(
    r"""(?P<ws>[ \t\r\f\v]+)
      | (?P<nl>\n)
      | (?P<lcom>//[^\n]*)
      | (?P<bcom>/\*.*?\*/)
      | (?P<raw>(?:u8|u|U|L)?R"(?P<delim>[^()\\ \n]{0,16})\()
      | (?P<str>(?:u8|u|U|L)?"(?:\\.|[^"\\\n])*")
      | (?P<chr>(?:u8|u|U|L)?'(?:\\.|[^'\\\n])+')
      | (?P<num>\.?[0-9](?:[0-9a-zA-Z_.]|'[0-9a-zA-Z]|[eEpP][+-])*)
      | (?P<id>[A-Za-z_][A-Za-z_0-9]*)
      | (?P<op>::|->|\[\[|\]\]|.)""",
    re.X | re.S)


def tokens(text):
    """Yields (kind, value, line) for the significant tokens of C++ text."""
    line = 1
    pos = 0
    at_line_start = True
    n = len(text)
    while pos < n:
        if at_line_start:
            # A preprocessor directive, continued by backslash-newlines.
            m = re.match(r"[ \t]*#", text[pos:pos + 256])
            if m:
                end = pos
                while True:
                    nl = text.find("\n", end)
                    if nl < 0:
                        end = n
                        break
                    if text[nl - 1] == "\\":
                        line += 1
                        end = nl + 1
                        continue
                    end = nl
                    break
                pos = end
                continue
        m = TOKEN.match(text, pos)
        kind = m.lastgroup
        value = m.group(0)
        if kind == "raw":
            close = ")" + m.group("delim") + '"'
            end = text.find(close, m.end())
            end = n if end < 0 else end + len(close)
            value = text[pos:end]
            yield ("str", "", line)
            line += value.count("\n")
            pos = end
            at_line_start = False
            continue
        pos = m.end()
        if kind == "nl":
            line += 1
            at_line_start = True
            continue
        if kind in ("ws", "lcom"):
            continue
        if kind == "bcom":
            line += value.count("\n")
            continue
        at_line_start = False
        if kind == "delim":
            kind = "op"
        yield (kind, value, line)


def strip_template_prefix(head):
    """Drops leading `template <...>` groups from a token list."""
    i = 0
    while i < len(head) and head[i][1] == "template":
        if i + 1 < len(head) and head[i + 1][1] == "<":
            depth = 0
            j = i + 1
            while j < len(head):
                v = head[j][1]
                if v == "<":
                    depth += 1
                elif v == ">":
                    depth -= 1
                    if depth == 0:
                        break
                elif v in ("(", "["):
                    # Parentheses inside a template head hold no angle brackets
                    # that matter here; skip to the matching close.
                    close = ")" if v == "(" else "]"
                    d = 0
                    while j < len(head):
                        if head[j][1] == v:
                            d += 1
                        elif head[j][1] == close:
                            d -= 1
                            if d == 0:
                                break
                        j += 1
                j += 1
            i = j + 1
        else:
            i += 1
    return head[i:]


def classify(head):
    """Returns ('container'|'function'|'block', name) for the tokens before a
    `{` at namespace or class scope."""
    head = strip_template_prefix(head)
    # Attributes [[...]] say nothing about what the brace opens.
    cleaned = []
    depth = 0
    for t in head:
        if t[1] == "[[":
            depth += 1
        elif t[1] == "]]":
            depth -= 1
        elif depth == 0:
            cleaned.append(t)
    head = cleaned
    if not head:
        return ("block", None)
    words = [t[1] for t in head]
    if words[0] == "extern" and len(head) >= 2 and head[1][0] == "str":
        if len(head) == 2:
            return ("container", None)
        head = head[2:]
        words = words[2:]
    # A container keyword before any parenthesis.
    for w in words:
        if w == "(":
            break
        if w in SKIP_WORDS:
            return ("block", None)
        if w in CONTAINER_WORDS:
            return ("container", None)
    # A function needs a parameter list: find the first top-level `(` whose
    # preceding token is a name (or an operator's symbol) that is not an
    # attribute-like word. An `=` at top level before it makes an initializer.
    paren = 0
    angle_ok = True
    name = None
    for i, t in enumerate(head):
        v = t[1]
        if v == "(":
            if paren == 0 and name is None and i > 0:
                prev = head[i - 1]
                if prev[0] == "id" and prev[1] not in NOT_A_NAME:
                    name = qualified_name(head, i - 1)
                elif i >= 2 and is_operator_name(head, i - 1):
                    name = operator_name(head, i - 1)
            paren += 1
        elif v == ")":
            paren -= 1
        elif v == "=" and paren == 0:
            if not preceded_by_operator(head, i):
                return ("block", None)
    del angle_ok
    if name is None:
        return ("block", None)
    return ("function", name)


def qualified_name(head, i):
    parts = [head[i][1]]
    j = i - 1
    while j >= 1 and head[j][1] in ("::", "~"):
        if head[j][1] == "~":
            parts.insert(0, "~")
            j -= 1
            continue
        if head[j - 1][0] == "id":
            parts.insert(0, "::")
            parts.insert(0, head[j - 1][1])
            j -= 2
        else:
            break
    return "".join(parts)


def is_operator_name(head, i):
    # operator() / operator== / operator[] ...: walk back to `operator`.
    for j in range(i, max(i - 4, -1), -1):
        if head[j][1] == "operator":
            return True
    return False


def operator_name(head, i):
    for j in range(i, max(i - 4, -1), -1):
        if head[j][1] == "operator":
            return "operator" + "".join(t[1] for t in head[j + 1:i + 1])
    return "operator"


def preceded_by_operator(head, i):
    return any(head[j][1] == "operator" for j in range(max(0, i - 3), i))


def functions(path):
    """Yields (name, first_line, last_line) for each function defined in path."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    # Scope stack entries: [kind, head tokens, paren depth, init_list]
    # kind: 'container' (namespace/class/file), 'function', 'block'.
    stack = [["container", [], 0, False]]
    func = None  # (name, first_line, depth) of the function being read
    depth = 0
    for kind, v, line in tokens(text):
        top = stack[-1]
        if func is not None:
            # Inside a function body: only braces matter.
            if v == "{":
                depth += 1
            elif v == "}":
                depth -= 1
                if depth == 0:
                    yield (func[0], func[1], line)
                    func = None
                    stack.pop()
            continue
        if top[0] == "block":
            if v == "{":
                stack.append(["block", [], 0, False])
            elif v == "}":
                stack.pop()
            continue
        # Container scope: gather the head of the next declaration.
        if v == "(":
            top[2] += 1
            top[1].append((kind, v, line))
            continue
        if v == ")":
            top[2] -= 1
            top[1].append((kind, v, line))
            continue
        if top[2] > 0:
            # Braces inside parentheses (a macro's or a call's argument).
            if v == "{":
                stack.append(["block", [], 0, False])
            elif v != "}":
                top[1].append((kind, v, line))
            continue
        if v == ";":
            top[1] = []
            top[3] = False
            continue
        if v == "}":
            stack.pop()
            if stack:
                stack[-1][1] = []
                stack[-1][3] = False
            else:
                stack = [["container", [], 0, False]]
            continue
        if v == ":" and top[1] and top[1][-1][1] in (")", "const", "noexcept", "override"):
            # A constructor's member initializer list follows.
            top[3] = True
            top[1].append((kind, v, line))
            continue
        if v == "{":
            head = top[1]
            if top[3] and head and (head[-1][0] == "id" or head[-1][1] == ">"):
                # A member initializer `a_{x}` inside an initializer list.
                stack.append(["block", [], 0, False])
                head.append(("op", "{}", line))
                continue
            init_list = top[3]
            what, name = classify(cut_init_list(head) if init_list else head)
            first = head[0][2] if head else line
            top[1] = []
            top[3] = False
            if what == "function":
                func = (name, first)
                depth = 1
                stack.append(["function", [], 0, False])
            elif what == "container":
                stack.append(["container", [], 0, False])
            else:
                stack.append(["block", [], 0, False])
            continue
        if v in ("public", "private", "protected") or (v == ":" and top[1] and
                                                         top[1][-1][1] in ("public", "private",
                                                                            "protected")):
            if v == ":":
                top[1] = []
            else:
                top[1].append((kind, v, line))
            continue
        top[1].append((kind, v, line))


def cut_init_list(head):
    """The declarator part of a constructor head (before its `:`)."""
    paren = 0
    for i, t in enumerate(head):
        if t[1] == "(":
            paren += 1
        elif t[1] == ")":
            paren -= 1
        elif t[1] == ":" and paren == 0:
            return head[:i]
    return head


def source_files(paths, excludes):
    for p in paths:
        if os.path.isfile(p):
            yield p
            continue
        for root, dirs, files in os.walk(p):
            dirs.sort()
            if any(os.path.normpath(root).startswith(os.path.normpath(e)) for e in excludes):
                dirs[:] = []
                continue
            for f in sorted(files):
                if f.endswith(SOURCE_EXT):
                    yield os.path.join(root, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max", type=int, default=80)
    ap.add_argument("--exclude", action="append", default=[])
    ap.add_argument("--all", action="store_true", help="list every function with its length")
    ap.add_argument("paths", nargs="*")
    a = ap.parse_args()
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    paths = a.paths or ["src", "server"]
    found = []
    for path in source_files(paths, a.exclude):
        for name, first, last in functions(path):
            n = last - first + 1
            if a.all or n > a.max:
                found.append((n, path, first, name))
    found.sort(key=lambda x: (-x[0], x[1], x[2]))
    failing = 0
    for n, path, first, name in found:
        allowed = (path, name) in ALLOWED
        failing += not allowed and n > a.max
        print(f"{path}:{first}: {name}: {n} lines" + (" (allowed)" if allowed else ""))
    if a.all:
        return 0
    if not a.paths and not a.exclude:
        long_ones = {(path, name) for n, path, _, name in found}
        for path, name in sorted(ALLOWED - long_ones):
            print(f"check-function-length: stale ALLOWED entry {path}: {name} "
                  f"(no longer over {a.max} lines; remove it)", file=sys.stderr)
    if failing:
        print(f"check-function-length: {failing} function(s) over {a.max} lines "
              "(split them into named steps)", file=sys.stderr)
        return 1
    print(f"check-function-length: no function over {a.max} lines"
          + (f" outside the {len(ALLOWED)} allowed" if found else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
