"""Download the user's script before the task starts (init container, stdlib only).

usage: fetch.py URL DEST [SHA256]
"""
import hashlib
import os
import sys
import time
import urllib.error
import urllib.request

url, dest = sys.argv[1], sys.argv[2]
want = sys.argv[3] if len(sys.argv) > 3 else ""
backoff = float(os.environ.get("TFHELM_FETCH_BACKOFF", "2"))  # seconds, times the attempt
for attempt in range(1, 6):  # the file server may still be starting
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            body = resp.read()
        break
    except OSError as err:
        if isinstance(err, urllib.error.HTTPError) and err.code < 500:
            sys.exit(f"fetch {url}: {err}")  # it answered: retrying will not make the file appear
        print(f"fetch {url}: attempt {attempt} failed: {err}", file=sys.stderr)
        if attempt == 5:
            sys.exit(1)
        time.sleep(backoff * attempt)
got = hashlib.sha256(body).hexdigest()
if want and got != want.lower():
    sys.exit(f"fetch {url}: sha256 {got} does not match the expected {want}")
with open(dest, "wb") as out:
    out.write(body)
print(f"fetched {url} ({len(body)} bytes, sha256 {got}) to {dest}")
