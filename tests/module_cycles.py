#!/usr/bin/env python3
"""Finds import cycles between the modules of a Rust crate.

A module is a file, or the twin files one `mod` declaration picks between
(`#[cfg_attr(not(feature = "cuda"), path = "staging_absent.rs")] mod
staging;`: both are module `staging`, and each one's imports are its
edges). An edge A -> B means code in A names an item that B defines, or
names it through B: paths through `crate::`, `super::`, `self::` and child
modules are followed through re-exports (`pub use`, aliases included) to
the module that defines the item, and every module whose re-export the
path went through is an edge too (a module's own ancestors excepted: a
child naming a sibling's item through its parent's re-export is no knot).
Test modules (`#[cfg(test)] mod tests { ... }` at a file's end) are left
out: tests may reach anywhere.

Written by hand: cargo-modules does this from rust-analyzer, but it builds
for many minutes and wants a compiler version of its own; this reads the
source text, which our own style (explicit `use`, no glob imports outside
tests) keeps simple.

Usage: module_cycles.py <crate src dir>...   exit 1 when a cycle is found.
       module_cycles.py --self-test          the checks above, on crates made here.
"""
import os
import re
import sys

ITEM = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:unsafe\s+)?(?:fn|struct|enum|trait|type|const|static|mod|union|macro_rules!)\s+(\w+)", re.M)
REEXPORT = re.compile(r"^\s*pub(?:\([^)]*\))?\s+use\s+([^;]+);", re.M)
TWIN = re.compile(r'#\[(?:cfg_attr\([^\]]*?,\s*)?path\s*=\s*"([^"]+)"\)?\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;')
PATH = re.compile(r"(?<![\w:])((?:crate|super|self|\w+)(?:::\w+)*)(::\{)?")


def strip(src):
    src = re.sub(r"//[^\n]*", "", src)
    src = re.sub(r'"(?:\\.|[^"\\])*"', '""', src)
    cut = re.search(r"^#\[cfg\(test\)\]\s*\n\s*mod tests\b", src, re.M)
    return src[: cut.start()] if cut else src


def group_at(text, start):
    """The `{...}` group opening at `text[start]`, nested groups included."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start : i + 1]
    return text[start:]


def split_top(body):
    """Splits a group's body at its top-level commas."""
    parts, depth, current = [], 0, ""
    for ch in body:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return parts + [current]


def expand(path, group):
    """`a::b::{c, d::{e, f}, g as h}` -> [a::b::c, a::b::d::e, a::b::d::f, a::b::g]."""
    if not group:
        return [path.split("::")]
    out = []
    for part in split_top(group[1:-1]):
        part = part.strip()
        if not part:
            continue
        if part == "self":
            out.append(path.split("::"))
            continue
        inner = part.find("::{")
        if inner >= 0:
            out.extend(expand(path + "::" + part[:inner], group_at(part, inner + 2)))
        else:
            out.append(path.split("::") + part.split(" as ")[0].strip().split("::"))
    return out


def module_of(root, path):
    """The module a file is by its place in the tree."""
    parts = os.path.relpath(path, root)[:-3].split("/")
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def twins(root, paths):
    """{file: module} for files a `path` attribute makes another module (the
    path is relative to the declaring file's directory)."""
    out = {}
    for p in paths:
        for file, name in TWIN.findall(open(p).read()):
            out[os.path.normpath(os.path.join(os.path.dirname(p), file))] = module_of(root, p) + (name,)
    return out


class Crate:
    def __init__(self, root):
        self.root = root
        paths = [os.path.join(dp, f) for dp, _, fns in os.walk(root) for f in fns if f.endswith(".rs")]
        renamed = twins(root, paths)
        self.files, self.src = {}, {}
        for p in sorted(paths):
            m = renamed.get(os.path.normpath(p), module_of(root, p))
            self.files.setdefault(m, p)
            # Twins are one module: the items and imports of both.
            self.src[m] = self.src.get(m, "") + "\n" + strip(open(p).read())
        self.items = {m: set(ITEM.findall(s)) for m, s in self.src.items()}
        self.reexports = {}
        for m, s in self.src.items():
            for spec in REEXPORT.findall(s):
                spec = spec.strip()
                g = re.match(r"((?:\w+::)*\w+)(?:::(\{.*\}))?$", spec, re.S)
                if not g:
                    continue
                for full in expand(g.group(1), g.group(2)):
                    alias = re.search(r"\bas\s+(\w+)", spec)
                    name = full[-1]
                    if alias and not g.group(2):
                        name = alias.group(1)
                    self.reexports[(m, name)] = self.absolute(m, full)

    def absolute(self, m, path):
        """A path as written in module m, from the crate root."""
        head, rest = path[0], path[1:]
        if head == "crate":
            return list(rest)
        if head == "self":
            return list(m) + list(rest)
        if head == "super":
            base = list(m)[:-1]
            while rest and rest[0] == "super":
                base, rest = base[:-1], rest[1:]
            return base + list(rest)
        if tuple(list(m) + [head]) in self.files:
            return list(m) + list(path)
        return None

    def resolve(self, path, depth=0, via=None):
        """The module defining what `path` (from the root) names."""
        for n in range(len(path), -1, -1):
            mod = tuple(path[:n])
            if mod not in self.files:
                continue
            if n < len(path) and depth < 8:
                target = self.reexports.get((mod, path[n]))
                if target is not None and target[: len(mod)] != list(mod) + [path[n]]:
                    if via is not None: via.append(mod)
                    return self.resolve(target + list(path[n + 1 :]), depth + 1, via)
            return mod
        return None

    def edges(self):
        out = {m: set() for m in self.files}
        for m, s in self.src.items():
            body = REEXPORT.sub("", s)
            body = re.sub(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*;", "", body, flags=re.M)
            for match in PATH.finditer(body):
                group = group_at(body, match.end() - 1) if match.group(2) else None
                if "::" not in match.group(1) and group is None:
                    continue
                for path in expand(match.group(1), group):
                    absolute = self.absolute(m, path)
                    if absolute is None:
                        continue
                    via = []
                    target = self.resolve(absolute, via=via)
                    for t in [target] + via:
                        if t is not None and t != m and t != () and m[:len(t)] != t:
                            out[m].add(t)
        return out


def cycles(edges):
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(100000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def name(m):
    return "::".join(m) or "crate"


def main(roots):
    failed = False
    for root in roots:
        crate = Crate(root)
        edges = crate.edges()
        found = cycles(edges)
        print(f"{root}: {len(crate.files)} modules, {len(found)} import cycle(s)")
        for comp in found:
            failed = True
            members = set(comp)
            print(f"  cycle of {len(comp)}:")
            for m in comp:
                print(f"    {name(m)} -> {', '.join(sorted(name(t) for t in edges[m] if t in members))}")
    return 1 if failed else 0


def self_test():
    """Each rule above on a small crate made here: a cycle it must find."""
    import tempfile

    crates = {
        "through a re-export, by an alias": {
            "lib.rs": "mod a;\nmod b;\nfn f() { a::g(); }",
            "a/mod.rs": "mod inner;\npub(crate) use inner::X;\npub fn g() { crate::b::h(); }",
            "a/inner.rs": "pub const X: u8 = 1;",
            "b.rs": "use crate::a::X as Y;\npub fn h() -> u8 { Y }",
        },
        "through a twin": {
            "lib.rs": '#[cfg_attr(not(feature = "x"), path = "a_absent.rs")]\nmod a;\nmod b;',
            "a.rs": "pub fn g() {}",
            "a_absent.rs": "pub fn g() { crate::b::h(); }",
            "b.rs": "pub fn h() { crate::a::g(); }",
        },
    }
    for what, files in crates.items():
        with tempfile.TemporaryDirectory() as root:
            for name, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(root, name)), exist_ok=True)
                open(os.path.join(root, name), "w").write(text)
            assert cycles(Crate(root).edges()), f"no cycle found {what}"
    print("module_cycles.py: every rule finds its cycle")
    return 0


if __name__ == "__main__":
    sys.exit(self_test() if sys.argv[1:] == ["--self-test"] else main(sys.argv[1:]))
