"""The machine a benchmark ran on, for the line every figure carries."""

import os
import platform


def cpu_model():
    """The CPU's model name with its family and model numbers, e.g. 'AMD EPYC
    (family 25, model 17)': cloud CPUs often share one name across
    generations."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
            else:
                name = platform.processor()
        with open("/proc/cpuinfo") as f:
            text = f.read()
        fam = [l for l in text.splitlines() if l.startswith("cpu family")]
        mod = [l for l in text.splitlines() if l.startswith("model\t")]
        if fam and mod:
            name += " (family %s, model %s)" % (fam[0].split(":")[1].strip(), mod[0].split(":")[1].strip())
        return name
    except OSError:
        return platform.processor()


def rss_bytes():
    """This process's resident memory, in bytes (Linux /proc)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def disk_bytes(path):
    """Bytes of the files under path (files that vanish meanwhile count 0)."""
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(folder, name))
            except OSError:
                pass
    return total
