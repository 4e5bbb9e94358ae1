"""Runs the fenced command blocks of the documentation against a build, so
that the docs cannot drift from the tool (CTest docs.CommandBlocks).

    /usr/bin/python3 tests/docs/run_doc_blocks.py BUILD_DIR DOC.md [DOC.md ...]

Every ```sh / ```bash / ```shell block of a document runs with bash (-e -o
pipefail: a failing command fails the block), and every ```python block as a
script of its own with /usr/bin/python3, in the document's order, in one
scratch directory per document: files a block writes are there for the
blocks after it. `hedgedb` is BUILD_DIR/bin/hedgedb (first on PATH) and
`import hedgedb` is BUILD_DIR/python. Blocks without a language (output,
formats) are text and do not run.

An HTML comment just before a block (blank lines between are allowed)
changes how it runs; a reader of the rendered page does not see it:

    <!-- doc-test: skip (REASON) -->   does not run; REASON is required and
                                       printed (apt installs, hours of
                                       training, downloads)
    <!-- doc-test: setup
    CODE -->                          runs CODE (the block's language) just
                                       before the block, in the same script:
                                       what the text around the block assumes
                                       (an open db, query arrays)
    <!-- doc-test: after
    CODE -->                          runs CODE after the block, in the same
                                       script: a check of what the doc says
                                       it shows, or files later blocks read
    <!-- doc-test: replace OLD => NEW (REASON) -->
                                       runs the block with the text OLD
                                       replaced by NEW, e.g. a training
                                       budget sized for a user cut to one
                                       sized for CI; OLD must occur

Several comments may precede one block. A block fails the run when it exits
non-zero or takes longer than --timeout seconds; the output of a failed
block is printed. Exit status: 0 when every block that runs passes.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

FENCE = re.compile(r"^```(\w*)\s*$")
MARKER = re.compile(r"<!--\s*doc-test:\s*(.*?)\s*-->", re.S)
SHELLS = {"sh", "bash", "shell"}


def parse_blocks(path):
    """(line, language, code, directives) of every fenced block of `path`;
    directives are the doc-test comments between the previous block (or
    text) and this one."""
    text = open(path, encoding="utf-8").read()
    lines = text.split("\n")
    blocks, i = [], 0
    pending = []  # (line, directive) of comments since the last text line
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence:
            start, language, code = i + 1, fence.group(1), []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                code.append(lines[i])
                i += 1
            if i == len(lines):
                raise SystemExit(f"{path}:{start}: unclosed fence")
            blocks.append((start, language, "\n".join(code) + "\n", [d for _, d in pending]))
            pending = []
            i += 1
            continue
        if lines[i].lstrip().startswith("<!--") and "doc-test:" in lines[i]:
            first = i
            chunk = lines[i]
            while "-->" not in chunk and i + 1 < len(lines):
                i += 1
                chunk += "\n" + lines[i]
            match = MARKER.search(chunk)
            if not match:
                raise SystemExit(f"{path}:{first + 1}: a doc-test comment that does not close")
            pending.append((first + 1, match.group(1)))
        elif lines[i].strip():
            if pending:
                raise SystemExit(f"{path}:{pending[0][0]}: doc-test comment not followed by a "
                                 "block (text comes between)")
        i += 1
    return blocks


def apply_directives(path, line, code, directives):
    """(skip reason or None, setup, check, code after replacements)."""
    setup, check = "", ""
    for d in directives:
        if d.startswith("skip"):
            reason = re.fullmatch(r"skip\s*\((.+)\)", d, re.S)
            if not reason:
                raise SystemExit(f"{path}:{line}: 'skip' needs a reason: skip (REASON)")
            return reason.group(1).strip(), "", "", code
        if d.startswith("setup"):
            setup += d[len("setup"):].strip() + "\n"
        elif d.startswith("after"):
            check += d[len("after"):].strip() + "\n"
        elif d.startswith("replace"):
            rule = re.fullmatch(r"replace\s+(.+?)\s+=>\s+(.+?)\s*\((.+)\)", d, re.S)
            if not rule:
                raise SystemExit(f"{path}:{line}: expected 'replace OLD => NEW (REASON)'")
            old, new = rule.group(1), rule.group(2)
            if old not in code:
                raise SystemExit(f"{path}:{line}: replace: '{old}' is not in the block")
            code = code.replace(old, new)
        else:
            raise SystemExit(f"{path}:{line}: unknown doc-test directive '{d.split()[0]}'")
    return None, setup, check, code


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build", help="the build directory (bin/hedgedb, python/)")
    parser.add_argument("docs", nargs="+", help="Markdown files")
    parser.add_argument("--timeout", type=float, default=150, help="seconds per block")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directories")
    parser.add_argument("--verbose", action="store_true", help="print every block's output")
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    env = dict(os.environ)
    env["PATH"] = os.path.join(build, "bin") + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(build, "python")] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                           if p])
    failures, ran, skipped = 0, 0, 0
    start_all = time.monotonic()
    for doc in args.docs:
        scratch = tempfile.mkdtemp(prefix="hedgedb_doc_")
        for line, language, code, directives in parse_blocks(doc):
            runs = language in SHELLS or language == "python"
            if not runs:
                if directives:
                    raise SystemExit(f"{doc}:{line}: doc-test comment before a block that does "
                                     f"not run (```{language})")
                continue
            reason, setup, check, code = apply_directives(doc, line, code, directives)
            where = f"{doc}:{line} ({language})"
            if reason is not None:
                print(f"SKIP {where}: {reason}", flush=True)
                skipped += 1
                continue
            if language == "python":
                script = os.path.join(scratch, f"block_{line}.py")
                with open(script, "w", encoding="utf-8") as f:
                    f.write(setup + code + check)
                command = ["/usr/bin/python3", script]
            else:
                script = os.path.join(scratch, f"block_{line}.sh")
                with open(script, "w", encoding="utf-8") as f:
                    f.write("set -e -o pipefail\n" + setup + code + check)
                command = ["bash", script]
            began = time.monotonic()
            try:
                result = subprocess.run(command, cwd=scratch, env=env, capture_output=True,
                                        text=True, timeout=args.timeout)
                ok = result.returncode == 0
                output = result.stdout + result.stderr
                status = f"exit {result.returncode}"
            except subprocess.TimeoutExpired as e:
                ok = False
                output = (e.stdout or b"").decode(errors="replace") + \
                         (e.stderr or b"").decode(errors="replace")
                status = f"timed out after {args.timeout:.0f} s"
            ran += 1
            seconds = time.monotonic() - began
            if ok:
                print(f"ok   {where} {seconds:.1f} s", flush=True)
                if args.verbose:
                    print(output, flush=True)
            else:
                failures += 1
                print(f"FAIL {where} {seconds:.1f} s: {status}\n--- block ---\n{setup}{code}"
                      f"{check}--- output (last 4000 characters) ---\n{output[-4000:]}",
                      flush=True)
        if args.keep:
            print(f"scratch directory of {doc}: {scratch}")
        else:
            subprocess.run(["rm", "-rf", scratch], check=False)
    print(f"{ran} blocks ran, {failures} failed, {skipped} skipped "
          f"({time.monotonic() - start_all:.0f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
