SandboxReplaySearch.manifest({"count": 22, "parts": [
["action_requests.json","part-0001.js"]
]});
