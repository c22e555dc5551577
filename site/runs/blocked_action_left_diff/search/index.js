SandboxReplaySearch.manifest({"count": 33, "parts": [
["0b2215060bee9574","part-0001.js"]
]});
