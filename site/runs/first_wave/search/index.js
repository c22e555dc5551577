SandboxReplaySearch.manifest({"count": 44, "parts": [
["1b5f861b9589ef3b","part-0001.js"]
]});
