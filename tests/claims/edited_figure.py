#!/usr/bin/env python3
"""The claims check fails when a quoted figure is edited, and says where and what the source gives.

Copies of the repository's own files are edited and each copy is checked as if it were the
original (check_claims.py --as): a figure of a generated table (in any checked file, and in a
benchmark README), an annotated figure, a new figure with no source in a docs page and in a
benchmark README, and links to a missing file and heading. Each must fail naming the file, the line, the figure and,
for the first two, the source's value; the unedited copies must pass, so that the failures come
from the edits alone.
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = [sys.executable, os.path.join(ROOT, "scripts", "check_claims.py")]
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import check_claims  # noqa: E402

failures = []


def check_as(name, text):
    with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False, encoding="utf-8") as f:
        f.write(text)
    try:
        return subprocess.run(CHECK + ["--as", name, f.name], capture_output=True, text=True)
    finally:
        os.unlink(f.name)


def expect(label, name, text, rc, *needles):
    r = check_as(name, text)
    out = r.stdout + r.stderr
    print(f"--- {label}: exit {r.returncode}\n{out.strip()}")
    if (r.returncode != 0) != (rc != 0):
        failures.append(f"{label}: exit {r.returncode}, expected {'non-zero' if rc else 0}")
    for n in needles:
        if n not in out:
            failures.append(f"{label}: the output does not say {n!r}")


def bump(fig):
    """The figure with its last digit changed (9 becomes 8, anything else goes up by one)."""
    k = max(i for i, ch in enumerate(fig) if ch.isdigit())
    d = fig[k]
    return fig[:k] + ("8" if d == "9" else str(int(d) + 1)) + fig[k + 1:]


def read(name):
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        return f.read()


names = check_claims.files()

# 1. A figure in a generated table: the first one of any checked file, and the first one of a
#    benchmark README (they are strict too).
def first_generated_figure(candidates):
    for name in candidates:
        lines = read(name).split("\n")
        inside = False
        for i, line in enumerate(lines):
            if check_claims.GEN_START.match(line):
                inside, start = True, i
            elif check_claims.END.match(line):
                inside = False
            elif inside:
                m = check_claims.FIGURE.search(line)
                if m:
                    return name, lines, start, i, m
    return None


def edit_generated(candidates, what):
    gen = first_generated_figure(candidates)
    if not gen:
        failures.append(f"no generated table with a figure in {what}: nothing to edit")
        return
    name, lines, start, i, m = gen
    expect("unedited " + name, name, "\n".join(lines), 0)
    fig = m.group(0).strip()
    edited = list(lines)
    edited[i] = lines[i][:m.start()] + bump(m.group(0)) + lines[i][m.end():]
    spec = " ".join(check_claims.GEN_START.match(lines[start]).group(1, 2)).split()
    expect(f"{name}: generated figure {fig} edited to {bump(fig)}", name, "\n".join(edited), 1,
           f"{name}:{i + 1}", f"generated block {' '.join(spec)} differs from its sources (", "results", bump(fig), fig)


edit_generated(names, "any checked file")
edit_generated([n for n in names if n.startswith("benchmarks/")], "a benchmark README")

# 2. An annotated figure.
ann = None
for name in names:
    lines = read(name).split("\n")
    for i, line in enumerate(lines):
        a = re.search(r"<!--\s*src\s+(.+?):\s", line)
        if a and a.group(1).strip() in line[:a.start()]:
            ann = (name, lines, i, a.group(1).strip(), a.start())
            break
    if ann:
        break
if not ann:
    failures.append("no annotated figure in any checked file: nothing to edit")
else:
    name, lines, i, fig, at = ann
    expect("unedited " + name, name, "\n".join(lines), 0)
    k = lines[i].rfind(fig, 0, at)
    edited = list(lines)
    edited[i] = lines[i][:k] + bump(fig) + lines[i][k + len(fig):at] + lines[i][at:].replace(
        f"src {fig}:", f"src {bump(fig)}:", 1)
    expect(f"{name}: annotated figure {fig} edited to {bump(fig)}", name, "\n".join(edited), 1,
           f"{name}:{i + 1}", f"{bump(fig)} does not match its source, which gives {fig}")
    # The visible figure alone edited, its annotation left as it was.
    edited[i] = lines[i][:k] + bump(fig) + lines[i][k + len(fig):]
    expect(f"{name}: figure {fig} edited to {bump(fig)}, annotation unchanged", name, "\n".join(edited), 1,
           f"{name}:{i + 1}: annotation names {fig!r}, which is not a figure of this line")

# 3. A new figure without a source on a strict page.
text = "# A page\n\nThe new engine is 1.42x faster than DDP everywhere.\n"
expect("docs page: a figure without a source", "docs/unsourced.md", text, 1,
       "docs/unsourced.md:3", "1.42x has no source")

# 3b. The same in a benchmark README, which is strict as well.
text = read("benchmarks/README.md") + "\nThe new engine is 1.42x faster than DDP everywhere.\n"
line = text.count("\n")
expect("benchmark README: a figure without a source", "benchmarks/README.md", text, 1,
       f"benchmarks/README.md:{line}", "1.42x has no source")

# 4. A link to a file that does not exist, and to a heading a file does not have.
text = "# A page\n\nSee [the policies](policies.md#no-such-heading) and [gone](gone.md).\n"
expect("docs page: broken links", "docs/links.md", text, 1,
       "docs/links.md:3: link to policies.md#no-such-heading", "docs/links.md:3: link to gone.md, which does not exist")

if failures:
    print("\nFAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("\nthe claims check fails on each edit, naming file, line, figure and source")
