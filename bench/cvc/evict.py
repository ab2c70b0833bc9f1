"""Evict files from the page cache and check that it worked.

    python evict.py FILE...

Calls posix_fadvise(POSIX_FADV_DONTNEED) on each file (after fsync, so dirty pages can
go), then asks mincore (through `fincore`, util-linux) how many of its pages are still
resident; exits 1 if more than 1% are.
"""
import os
import subprocess
import sys


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def resident_pages(path):
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "PAGES,SIZE", path],
                         capture_output=True, text=True, check=True).stdout.split()
    pages, size = int(out[0]), int(out[1])
    return pages, max(1, -(-size // os.sysconf("SC_PAGE_SIZE")))


def main():
    bad = 0
    for p in sys.argv[1:]:
        evict(p)
        res, total = resident_pages(p)
        if res > total // 100:
            print(f"evict.py: {p}: {res} of {total} pages still resident", file=sys.stderr)
            bad = 1
    sys.exit(bad)


if __name__ == "__main__":
    main()
