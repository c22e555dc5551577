SandboxReplaySearch.manifest({"count": 28, "parts": [
["action_requests.json","part-0001.js"]
]});
