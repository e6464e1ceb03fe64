"""Download the user's script before the task starts (init container, stdlib only).

usage: fetch.py URL DEST [SHA256]

The .py files listed beside the script (a directory listing, as the user's file server
gives) are fetched too, into DEST's directory: the modules a script imports usually sit
there. A server without listings gives the script alone. SHA256 pins the script.
"""
import hashlib
import os
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

url, dest = sys.argv[1], sys.argv[2]
want = sys.argv[3] if len(sys.argv) > 3 else ""
backoff = float(os.environ.get("TFHELM_FETCH_BACKOFF", "2"))  # seconds, times the attempt


def get(url: str) -> bytes:
    for attempt in range(1, 6):  # the file server may still be starting
        try:
            with urllib.request.urlopen(url, timeout=30) as resp:
                return resp.read()
        except OSError as err:
            if isinstance(err, urllib.error.HTTPError) and err.code < 500:
                raise  # it answered: retrying will not make the file appear
            print(f"fetch {url}: attempt {attempt} failed: {err}", file=sys.stderr)
            if attempt == 5:
                sys.exit(1)
            time.sleep(backoff * attempt)


def save(path: str, body: bytes, source: str) -> None:
    with open(path, "wb") as out:
        out.write(body)
    print(f"fetched {source} ({len(body)} bytes, sha256 {hashlib.sha256(body).hexdigest()}) to {path}")


try:
    body = get(url)
except urllib.error.HTTPError as err:
    sys.exit(f"fetch {url}: {err}")
got = hashlib.sha256(body).hexdigest()
if want and got != want.lower():
    sys.exit(f"fetch {url}: sha256 {got} does not match the expected {want}")

base = url.rsplit("/", 1)[0] + "/"
try:
    listing = get(base).decode("utf-8", "replace")
except (urllib.error.HTTPError, ValueError):
    listing = ""  # no directory listing: the script alone
script = urllib.parse.unquote(url.rsplit("/", 1)[1])
for href in sorted(set(re.findall(r'href="([^"/?#]+\.py)"', listing))):
    name = urllib.parse.unquote(href)
    if name != script and not name.startswith("."):
        save(os.path.join(os.path.dirname(dest), name), get(base + href), base + href)
save(dest, body, url)
