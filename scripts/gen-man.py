#!/usr/bin/python3
"""Generate the section-3 manual from the public headers' comments.

    gen-man.py --out DIR [--version V] include/hicache/*.h

Writes DIR/<function>.3 for every HC_API function and DIR/hicache.3 (the
overview), removes any other *.3 in DIR (a function that left the headers
loses its page), and touches DIR/.stamp for the build. Standard library
only: the build runs it with the system python3.

The headers are the one source. Their convention, which this reads:
  - a top-level comment documents the run of declarations right under it
    (no blank line between): several functions may share one comment;
  - a blank line, a #define, a type definition or another comment ends
    the run; a declaration with nothing attached has no documentation
    (its page says so, and tests/integration/man_pages.sh fails on it);
  - a comment above a struct, enum or typedef documents that type; a
    page shows every type its prototype names that a header defines,
    with that comment and the definition as written;
  - the first comment of a header describes the header (hicache(3));
  - in a comment, " *" alone separates paragraphs, and lines indented by
    two or more spaces are preformatted (tables, formulas).
"""

import argparse
import os
import re
import sys
import textwrap

API_RE = re.compile(r"^HC_API\b")
FUNC_NAME_RE = re.compile(r"(\w+)\s*\($")
TYPE_DEF_RE = re.compile(r"^(struct|enum)\s+(\w+)\s*\{")
TYPEDEF_RE = re.compile(r"^typedef\b")
TYPEDEF_NAME_RE = re.compile(r"\(\s*\*\s*(\w+)\s*\)|(\w+)\s*;\s*$")
FORWARD_RE = re.compile(r"^struct\s+\w+\s*;")
HC_REF_RE = re.compile(r"\bhc_[a-z0-9_]+\b")

# Verbs paired by lifetime (STYLE.md): a page points at its partner.
PARTNERS = [
    ("_open", "_close"),
    ("_create", "_destroy"),
    ("_alloc", "_free"),
    ("_start", "hc_store_op_wait"),
    ("_set_handler", "_set_level"),
    ("_set_level", "_get_level"),
]


class Comment:
    def __init__(self, lines):
        self.lines = lines  # text lines, " * " stripped; "" = paragraph break

    def blocks(self):
        """Paragraphs as ("p", [lines]) and preformatted runs as ("pre", [lines])."""
        out = []
        gap = True
        for text in self.lines:
            if text.strip() == "":
                gap = True
                continue
            kind = "pre" if text.startswith("  ") else "p"
            if out and not gap and out[-1][0] == kind:
                out[-1][1].append(text)
            else:
                out.append((kind, [text]))
            gap = False
        return out

    def text(self):
        return " ".join(text.strip() for text in self.lines if text.strip())


class Func:
    def __init__(self, name, proto, header, comment, group):
        self.name = name
        self.proto = proto  # the declaration joined on one line, without HC_API
        self.header = header
        self.comment = comment  # Comment or None
        self.group = group  # id shared by the functions under one comment


class TypeDef:
    def __init__(self, name, text, comment, header):
        self.name = name  # "struct hc_x", "enum hc_y" or a typedef name
        self.text = text  # the definition as written
        self.comment = comment
        self.header = header


def strip_comment(raw):
    """Lines of a /* ... */ block without the comment markers."""
    body = raw.strip()
    assert body.startswith("/*") and body.endswith("*/")
    body = body[2:-2]
    lines = body.split("\n")
    out = []
    for i, line in enumerate(lines):
        s = line.rstrip()
        m = re.match(r"^\s*\* ?(.*)$", s)
        if m:
            s = m.group(1)
        elif i == 0:
            s = s.lstrip()
        else:
            s = s.strip()
        out.append(s)
    while out and out[0].strip() == "":
        out.pop(0)
    # A section rule ("---- v1, started now ... ----") is a heading for the
    # reader of the header, not text of the functions under it.
    if out and re.fullmatch(r"-{3,} .* -{3,}", out[0].strip()):
        out.pop(0)
    while out and out[0].strip() == "":
        out.pop(0)
    while out and out[-1].strip() == "":
        out.pop()
    return out


def parse_header(path):
    """Functions, types and the header's own comment, in file order."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    header = os.path.basename(path)
    funcs, types = [], []
    header_doc = None
    attached = None  # the comment the next declaration gets
    group = None
    seen_code = False
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if line.startswith("/*"):
            raw = [line]
            while "*/" not in raw[-1]:
                i += 1
                raw.append(lines[i])
            comment = Comment(strip_comment("\n".join(raw)))
            if not seen_code and header_doc is None:
                header_doc = comment
                attached = None
            else:
                attached = comment
                group = "%s:%d" % (header, i)
            i += 1
            continue
        if stripped == "":
            attached = None
            i += 1
            continue
        seen_code = True
        if API_RE.match(line) and not line.startswith("#"):
            decl = [line]
            while ";" not in decl[-1]:
                i += 1
                decl.append(lines[i])
            joined = " ".join(part.strip() for part in decl)
            joined = re.sub(r"\s+", " ", joined)
            proto = re.sub(r"^HC_API\s+", "", joined)
            head = proto.split("(", 1)[0] + "("
            m = FUNC_NAME_RE.search(head)
            if not m:
                sys.exit("gen-man.py: %s:%d: no function name in: %s" % (path, i + 1, joined))
            funcs.append(Func(m.group(1), proto, header, attached, group if attached else None))
            i += 1
            continue
        if FORWARD_RE.match(line):
            i += 1
            continue
        m = TYPE_DEF_RE.match(line)
        if m:
            body = [line]
            while not lines[i].startswith("}"):
                i += 1
                body.append(lines[i])
            name = "%s %s" % (m.group(1), m.group(2))
            types.append(TypeDef(name, "\n".join(body), attached, header))
            attached = None
            i += 1
            continue
        if TYPEDEF_RE.match(line):
            body = [line]
            while ";" not in body[-1]:
                i += 1
                body.append(lines[i])
            m = TYPEDEF_NAME_RE.search(" ".join(body))
            if m:
                types.append(TypeDef(m.group(1) or m.group(2), "\n".join(body), attached, header))
            attached = None
            i += 1
            continue
        attached = None
        i += 1
    return header_doc, funcs, types


# ---- roff ----


def esc(text):
    """Escape text for roff (not at the start of a line: see line())."""
    text = text.replace("\\", "\\e")
    text = text.replace("-", "\\-")
    return text


def line(text):
    """One output line of text: a leading '.' or ''' would be a request."""
    if text.startswith(".") or text.startswith("'"):
        return "\\&" + text
    return text


def highlight(text, known):
    """Escaped text with the names of known functions in bold."""
    out = []
    pos = 0
    for m in HC_REF_RE.finditer(text):
        out.append(esc(text[pos : m.start()]))
        name = m.group(0)
        out.append("\\fB%s\\fR" % esc(name) if name in known else esc(name))
        pos = m.end()
    out.append(esc(text[pos:]))
    return "".join(out)


def split_sentences(text):
    """Sentences of a paragraph: a '.' (outside parentheses) then a space and
    a letter, '-' (an errno), '*' (an out parameter) or '"' starts the next
    (the headers start sentences with parameter names: "opts may be NULL")."""
    out, depth, start = [], 0, 0
    for k, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]" and depth:
            depth -= 1
        elif ch in ".?!" and depth == 0 and k + 2 < len(text) and text[k + 1] == " ":
            nxt = text[k + 2]
            prev = text[max(0, k - 3) : k]
            if (nxt.isalpha() or nxt in "-*\"") and prev not in ("e.g", "i.e", "etc"):
                out.append(text[start : k + 1].strip())
                start = k + 2
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


RETURNS_RE = re.compile(r"^(Returns?\b|\w+ return\b|-E[A-Z]+\b|The (same )?returns?\b)")


def says_return(sentence):
    return bool(RETURNS_RE.match(sentence))


def summary(func):
    """NAME line text: the first sentence of the comment, lower-cased start."""
    if func.comment is None:
        return "undocumented"
    first = func.comment.blocks()[0]
    text = " ".join(s.strip() for s in first[1])
    sent = split_sentences(text)[0]
    sent = sent.rstrip(".")
    if len(sent) > 70:
        # A long first sentence: its head, up to the first ':' or ';'
        # (outside parentheses) that leaves enough to say something.
        depth = 0
        for k, ch in enumerate(sent):
            depth += ch in "(["
            depth -= ch in ")]"
            if ch in ":;" and depth == 0 and k >= 16 and sent[k + 1 : k + 2] == " ":
                sent = sent[:k]
                break
    word = sent.split(" ", 1)[0]
    if re.fullmatch(r"[A-Z][a-z]*:?", word):
        sent = sent[0].lower() + sent[1:]
    return sent


def wrap_proto(proto, width=78):
    """The prototype on one line, or one parameter a line (liburing's style)
    when that is wider than the page."""
    if len(proto) <= width:
        return [proto]
    open_at = proto.index("(")
    head, args = proto[: open_at + 1], proto[open_at + 1 :]
    parts, depth, cur = [], 0, ""
    for ch in args:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip() + ",")
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    pad = " " * len(head)
    return [head + parts[0]] + [pad + p for p in parts[1:]]


def pre_block(lines):
    out = [".PP", ".nf"]
    for text in lines:
        out.append(line(esc(text.expandtabs(8))))
    out.append(".fi")
    return out


def paragraphs(blocks, known):
    out = []
    for kind, lines in blocks:
        if kind == "pre":
            out += [".PP", ".nf"]
            out += [line(highlight(text, known)) for text in lines]
            out.append(".fi")
        else:
            out.append(".PP")
            text = " ".join(t.strip() for t in lines)
            out += [line(highlight(t, known)) for t in wrap(text)]
    return out


def wrap(text):
    """Source lines of about 78 columns (roff fills them again)."""
    return textwrap.wrap(text, 78, break_long_words=False, break_on_hyphens=False) or [""]


def description_and_returns(comment):
    """The comment's blocks without the sentences that say what the call
    returns, and those sentences (empty when it does not say)."""
    desc, returns = [], []
    for kind, lines in comment.blocks():
        if kind == "pre":
            desc.append((kind, lines))
            continue
        text = " ".join(s.strip() for s in lines)
        keep = []
        for sent in split_sentences(text):
            (returns if says_return(sent) else keep).append(sent)
        if keep:
            desc.append(("p", [" ".join(keep)]))
    return desc, returns


def referenced_types(func, types):
    names = set(re.findall(r"\b(?:struct|enum)\s+\w+", func.proto))
    names = {re.sub(r"\s+", " ", n) for n in names}
    words = set(re.findall(r"\b\w+\b", func.proto))
    found = [t for t in types if t.name in names or t.name in words]
    # In the order the prototype names them.
    return sorted(found, key=lambda t: re.search(r"\b%s\b" % re.escape(t.name), func.proto).start())


def see_also(func, funcs, by_name, types):
    names = []

    def add(name):
        if name != func.name and name in by_name and name not in names:
            names.append(name)

    if func.group:
        for other in funcs:
            if other.group == func.group:
                add(other.name)
    for a, b in PARTNERS:
        for x, y in ((a, b), (b, a)):
            if func.name.endswith(x):
                stem = func.name[: -len(x)]
                add(y if y.startswith("hc_") else stem + y)
    if func.name.endswith("_opts_init") or func.name.endswith("_init"):
        stem = func.name[: -len("_init")]
        add(stem + "_from_config")
    if func.name.endswith("_from_config"):
        add(func.name[: -len("_from_config")] + "_init")
    if func.comment:
        for ref in HC_REF_RE.findall(func.comment.text()):
            add(ref)
    # The initialiser and constructor of each struct the prototype names.
    for tag in re.findall(r"\bstruct hc_(\w+)", func.proto):
        for verb in ("_init", "_open", "_create", "_alloc"):
            add("hc_" + tag + verb)
    for t in referenced_types(func, types):
        if t.comment:
            for ref in HC_REF_RE.findall(t.comment.text()):
                add(ref)
    # Functions of the same header whose comment names this one.
    for other in funcs:
        if other.header == func.header and other.comment:
            if func.name in HC_REF_RE.findall(other.comment.text()):
                add(other.name)
    # Nothing else: the declarations beside it, which the headers keep
    # together by topic.
    if len(names) < 2:
        same = [f for f in funcs if f.header == func.header]
        k = same.index(func)
        for other in same[max(0, k - 1) : k + 2]:
            add(other.name)
    return names


def th(title, section, version):
    # .nh: identifiers are not words, never hyphenate them.
    return '.TH %s %s "" "hicache %s" "hicache manual"\n.nh' % (title.upper(), section, version)


def function_page(func, funcs, by_name, types, docs, version):
    known = set(by_name)
    out = [
        '.\\" Generated from include/hicache/%s by scripts/gen-man.py: edit the header\'s comment.' % func.header,
        th(func.name, 3, version),
        ".SH NAME",
        "%s \\- %s" % (esc(func.name), esc(summary(func))),
        ".SH LIBRARY",
        "hicache library (\\fIlibhicache\\fR, \\fI\\-lhicache\\fR; "
        "\\fBpkg\\-config \\-\\-cflags \\-\\-libs hicache\\fR)",
        ".SH SYNOPSIS",
        ".nf",
        "\\fB#include <hicache/%s>\\fR" % func.header,
        ".PP",
    ]
    for text in wrap_proto(func.proto):
        out.append(line(esc(text).replace(esc(func.name) + "(", "\\fB%s\\fR(" % esc(func.name), 1)))
    out.append(".fi")
    out.append(".SH DESCRIPTION")
    returns = []
    if func.comment is None:
        out += [".PP", "Not documented in <hicache/%s>." % func.header]
    else:
        desc, returns = description_and_returns(func.comment)
        if not desc:
            desc = [("p", [summary(func)[0].upper() + summary(func)[1:] + "."])]
        out += paragraphs(desc, known)
    for t in referenced_types(func, types):
        out.append(".SS %s" % esc(t.name))
        if t.comment:
            out += paragraphs(t.comment.blocks(), known)
        out += pre_block(t.text.split("\n"))
    if returns:
        out += [".SH RETURN VALUE", ".PP"]
        out += [line(highlight(t, known)) for t in wrap(" ".join(returns))]
    if docs.get(func.header):
        out += [
            ".SH NOTES",
            "<hicache/%s> states its conventions (errors, per\\-item results," % func.header,
            "thread safety) once for every function it declares: see \\fBhicache\\fR(3).",
        ]
    refs = see_also(func, funcs, by_name, types)
    out.append(".SH SEE ALSO")
    items = ["\\fB%s\\fR(3)" % esc(n) for n in refs] + ["\\fBhicache\\fR(3)"]
    out.append(",\n".join(items))
    return "\n".join(out) + "\n"


HEADER_ORDER = ["common.h", "log.h", "config.h", "mem.h", "key.h", "pool.h", "store.h", "cache.h"]


def overview_page(docs, funcs, by_name, version):
    known = set(by_name)
    out = [
        '.\\" Generated from include/hicache/*.h by scripts/gen-man.py: edit the headers\' comments.',
        th("hicache", 3, version),
        ".SH NAME",
        "hicache \\- hierarchical KV\\-cache store for LLM inference: the C library",
        ".SH LIBRARY",
        "hicache library (\\fIlibhicache\\fR, \\fI\\-lhicache\\fR; "
        "\\fBpkg\\-config \\-\\-cflags \\-\\-libs hicache\\fR)",
        ".SH SYNOPSIS",
        ".nf",
        "\\fB#include <hicache/hicache.h>\\fR",
        ".fi",
        ".SH DESCRIPTION",
        ".PP",
        "The umbrella header <hicache/hicache.h> includes every header below.",
        "Each function has its own page, generated from the comment above its",
        "declaration; this page gathers each header's own description and its",
        "functions.",
    ]
    order = [h for h in HEADER_ORDER if h in docs] + sorted(h for h in docs if h not in HEADER_ORDER)
    for header in order:
        doc = docs[header]
        out.append(".SS <hicache/%s>" % header)
        if doc:
            blocks = doc.blocks()
            # The first line repeats "hicache — <topic>."; keep the rest.
            kind, lines = blocks[0]
            if kind == "p" and lines[0].startswith("hicache"):
                topic = lines[0].split("\u2014", 1)[-1].strip()
                blocks[0] = ("p", [topic[0].upper() + topic[1:]] + lines[1:])
            out += paragraphs(blocks, known)
        for func in (f for f in funcs if f.header == header):
            out += [".TP", "\\fB%s\\fR(3)" % esc(func.name), line(esc(summary(func)))]
    out += [".SH SEE ALSO", "\\fBhicache\\fR(1)"]
    return "\n".join(out) + "\n"


def write_if_changed(path, text):
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    except FileNotFoundError:
        pass
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output directory (its other *.3 are removed)")
    ap.add_argument("--version", default="", help="the project's version, for the page footers")
    ap.add_argument("headers", nargs="+")
    args = ap.parse_args()

    funcs, types, docs = [], [], {}
    for path in sorted(args.headers):
        doc, f, t = parse_header(path)
        docs[os.path.basename(path)] = doc
        funcs += f
        types += t
    by_name = {}
    for f in funcs:
        if f.name in by_name:
            sys.exit("gen-man.py: %s declared twice (%s, %s)" % (f.name, by_name[f.name].header, f.header))
        by_name[f.name] = f
    # hicache.h only includes the others.
    docs = {h: d for h, d in docs.items() if any(f.header == h for f in funcs)}

    os.makedirs(args.out, exist_ok=True)
    pages = {"hicache.3": overview_page(docs, funcs, by_name, args.version)}
    for f in funcs:
        if f.name + ".3" in pages:
            sys.exit("gen-man.py: %s clashes with the overview page" % f.name)
        pages[f.name + ".3"] = function_page(f, funcs, by_name, types, docs, args.version)
    for name in os.listdir(args.out):
        if name.endswith(".3") and name not in pages:
            os.remove(os.path.join(args.out, name))
    for name, text in pages.items():
        write_if_changed(os.path.join(args.out, name), text)
    undocumented = [f.name for f in funcs if f.comment is None]
    if undocumented:
        print("gen-man.py: no comment above: %s" % ", ".join(undocumented), file=sys.stderr)
    with open(os.path.join(args.out, ".stamp"), "w", encoding="utf-8") as f:
        f.write("%d pages\n" % len(pages))


if __name__ == "__main__":
    main()
