"""Issue #25 round 5: N concurrent dry-run edits of big files over MCP stdio, and a small
list_directory sent while they run. Prints the server's peak RSS (VmHWM), how the calls
ended, and when the small call answered.

    python3 bench/edit_flood.py BIN WORKDIR N SIZE_MB [edit|editall]
    (TMO=5s sets request_timeout; the default is 30s)
"""
import json, subprocess, sys, os, time, threading
binp, root, n, size_mb = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
tool = sys.argv[5] if len(sys.argv) > 5 else "edit"
os.makedirs(root, exist_ok=True)
line = b"x = 1234567890 abcdefghijklmnopqrstuvwxyz\n"
blob = line * (size_mb * 1024 * 1024 // len(line))
for i in range(n):
    p = os.path.join(root, f"f{i}.txt")
    if not os.path.exists(p) or os.path.getsize(p) != len(blob) + 7:
        with open(p, "wb") as f: f.write(blob + b"NEEDLE\n")
env = dict(PATH=os.environ["PATH"], XDG_STATE_HOME=os.path.join(root, "..", "state"))
proc = subprocess.Popen([binp, "--root", root, "--set", "max_bytes_per_round=0", "--set", "request_timeout=" + os.environ.get("TMO","30s"), "--allow-write", "serve", "--no-index", "--tools", "edit,read_file,write_file,apply_patch,grep,list_directory"],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
def send(v):
    proc.stdin.write((json.dumps(v) + "\n").encode()); proc.stdin.flush()
answers = {}
def reader():
    for l in proc.stdout:
        try: v = json.loads(l)
        except Exception: continue
        if "id" in v: answers[v["id"]] = (time.time(), v)
threading.Thread(target=reader, daemon=True).start()
send({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"a","version":"1"}}})
while 0 not in answers: time.sleep(0.01)
send({"jsonrpc":"2.0","method":"notifications/initialized"})
t0 = time.time()
for i in range(n):
    if tool == "edit":
        args = {"path": f"f{i}.txt", "old_string": "NEEDLE", "new_string": "HAYSTACK", "dry_run": True}
    elif tool == "editall":
        args = {"path": f"f{i}.txt", "old_string": "1234", "new_string": "4321", "replace_all": True, "dry_run": True}
    send({"jsonrpc":"2.0","id":i+1,"method":"tools/call","params":{"name":"edit" if tool.startswith("edit") else tool,"arguments":args}})
time.sleep(0.3)
send({"jsonrpc":"2.0","id":9999,"method":"tools/call","params":{"name":"list_directory","arguments":{"path":"."}}})
peak = 0
while len([k for k in answers if k != 0]) < n + 1 and time.time() - t0 < 120:
    time.sleep(0.05)
    try:
        s = open(f"/proc/{proc.pid}/status").read()
        peak = int([l for l in s.split("\n") if l.startswith("VmHWM")][0].split()[1]) // 1024
    except Exception: break
alive = proc.poll() is None
codes = {}
for k, (t, v) in answers.items():
    if k in (0,): continue
    r = v.get("result", {})
    if r.get("isError"):
        txt = r["content"][0]["text"][:60]
        codes[txt] = codes.get(txt, 0) + 1
    else:
        codes["ok"] = codes.get("ok", 0) + 1
small = answers.get(9999)
print(f"n={n} size={size_mb}MB peak={peak}MiB alive={alive} answered={len(answers)-1} small_answer_after={(small[0]-t0) if small else None:.2f}s took={time.time()-t0:.1f}s")
print(codes)
proc.stdin.close(); proc.wait()
