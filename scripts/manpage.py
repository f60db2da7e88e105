#!/usr/bin/env python3
"""Writes a man page (troff, section 1) for a logsync command from its own parser's description.

usage: scripts/manpage.py BINARY > NAME.1

BINARY --experimental-dump-help prints what swift-argument-parser knows about the command: its abstract,
discussion, options and subcommands. The page is generated from that, so it never disagrees with --help.
"""
import json
import subprocess
import sys

LOGSYNC = "logsync"


def escape(text):
    """troff: a leading dot or quote would be read as a request; backslashes and hyphens are literal."""
    text = (text or "").replace("\\", "\\e").replace("-", "\\-")
    lines = []
    for line in text.split("\n"):
        lines.append("\\&" + line if line.startswith((".", "'")) else line)
    return "\n".join(lines)


def option_name(argument):
    names = argument.get("names") or []
    spelled = []
    for name in names:
        prefix = "-" if name["kind"] == "short" else "--"
        spelled.append(prefix + name["name"])
    if argument["kind"] == "positional":
        return "<" + argument.get("valueName", "value") + ">"
    text = ", ".join(spelled)
    if argument["kind"] == "option":
        text += " <" + argument.get("valueName", "value") + ">"
    return text


def synopsis(command, path):
    parts = [" ".join(path)]
    if command.get("subcommands"):
        parts.append("<subcommand>")
    for argument in command.get("arguments") or []:
        if not argument.get("shouldDisplay", True) or argument.get("valueName") in ("help", "version"):
            continue
        text = option_name(argument)
        parts.append("[" + text + "]" if argument.get("isOptional") else text)
    return " ".join(parts)


def options(command, out):
    for argument in command.get("arguments") or []:
        if not argument.get("shouldDisplay", True):
            continue
        out.append(".TP")
        out.append("\\fB" + escape(option_name(argument)) + "\\fR")
        abstract = argument.get("abstract") or ""
        default = argument.get("defaultValue")
        if default not in (None, "", "false"):
            abstract += " (default: " + default + ")"
        out.append(escape(abstract))


def page(tool):
    command = tool["command"]
    name = command["commandName"]
    out = [
        '.TH "%s" "1" "" "%s" "%s manual"' % (name.upper(), LOGSYNC, LOGSYNC),
        ".SH NAME",
        escape(name) + " \\- " + escape(command.get("abstract", "")),
        ".SH SYNOPSIS",
        ".B " + escape(synopsis(command, [name])),
    ]
    if command.get("discussion"):
        out += [".SH DESCRIPTION", escape(command["discussion"])]
    out.append(".SH OPTIONS")
    options(command, out)
    subcommands = command.get("subcommands") or []
    if subcommands:
        out.append(".SH SUBCOMMANDS")
        for sub in subcommands:
            if not sub.get("shouldDisplay", True) or sub["commandName"] == "help":
                continue
            out.append(".SS " + escape(sub["commandName"]))
            out.append(escape(sub.get("abstract", "")))
            out.append(".PP")
            out.append(".B " + escape(synopsis(sub, [name, sub["commandName"]])))
            if sub.get("discussion"):
                out += [".PP", escape(sub["discussion"])]
            options(sub, out)
    out += [".SH SEE ALSO", "The logsync documentation: README.md and docs/, installed in share/doc/logsync."]
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: scripts/manpage.py BINARY")
    dump = subprocess.run([sys.argv[1], "--experimental-dump-help"], check=True, capture_output=True, text=True)
    sys.stdout.write(page(json.loads(dump.stdout)))


if __name__ == "__main__":
    main()
