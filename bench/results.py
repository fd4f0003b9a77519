"""Helpers for bench/RESULTS.md: each benchmark owns one `## Section` and
replaces only its own section, so runs of different suites do not clobber
each other."""
from __future__ import annotations

import os
import platform
import re
import subprocess

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")


def machine() -> str:
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def replace_section(title: str, body: str) -> None:
    text = open(RESULTS).read() if os.path.exists(RESULTS) else "# Benchmark results\n"
    stamp = subprocess.run(["date", "-u", "+%Y-%m-%d %H:%M UTC"], capture_output=True, text=True).stdout.strip()
    section = f"## {title}\n\nMeasured {stamp} on {machine()}.\n\n{body.strip()}\n"
    pattern = re.compile(rf"^## {re.escape(title)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text)
    else:
        text = text.rstrip() + "\n\n" + section
    with open(RESULTS, "w") as f:
        f.write(text)
