"""Build-only helper (never in the image): `name==version` lines from a pip --report."""

import json
import sys

with open(sys.argv[1], encoding="utf-8") as report:
    installs = json.load(report)["install"]
for item in sorted(installs, key=lambda i: i["metadata"]["name"].lower()):
    print(f"{item['metadata']['name']}=={item['metadata']['version']}")
