"""One Hermes session of one profile, without a model: run by hermes-agent's own Python
(.venv-hermes, where `make hermes` installs kint) for tests/test_hermes_agent.py.

It does what hermes-agent 0.19 does around a conversation, with Hermes' own code: `-p
<profile>` sets HERMES_HOME through hermes_cli.profiles.resolve_profile_env; the memory
provider named by the profile's config.yaml is loaded by plugins.memory (Hermes' plugin
loader, which finds user plugins under $HERMES_HOME/plugins/); a MemoryManager initializes
it with the arguments agent_init passes (hermes_home, agent_identity = the active profile);
then the test drives Hermes' hooks over stdin, one JSON command a line:

  {"op": "remember", "category": c, "name": n, "body": b}   a model's sibyl_remember call
  {"op": "turn", "user": u, "assistant": a}                  a finished turn (sync_all)
  {"op": "close"}                                            the session ends (shutdown_all)

Each command is answered with one JSON line. Imported first: kint_test_gate, so Sibyl's
real account gate trusts the test's key and no connection leaves 127.0.0.1.
"""

from __future__ import annotations

import importlib
import json
import os
import sys

# Sibyl's gate and network guard, before Sibyl loads: imported for what its import does,
# by name as the worker forkserver's preload imports it (no name of it is used here).
importlib.import_module("kint_test_gate")


def reply(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> None:
    profile = sys.argv[1]
    if profile != "default":
        from hermes_cli.profiles import resolve_profile_env

        os.environ["HERMES_HOME"] = resolve_profile_env(profile)

    from agent.memory_manager import MemoryManager
    from hermes_cli.config import cfg_get, load_config
    from hermes_cli.profiles import get_active_profile_name
    from hermes_constants import get_hermes_home
    from plugins.memory import load_memory_provider

    name = cfg_get(load_config(), "memory", "provider", default="")
    provider = load_memory_provider(name)
    if provider is None or not provider.is_available():
        reply({"error": f"memory provider {name!r} did not load"})
        sys.exit(1)
    manager = MemoryManager()
    manager.add_provider(provider)
    manager.initialize_all(session_id=f"test-{profile}-{os.getpid()}", platform="cli",
                           hermes_home=str(get_hermes_home()), agent_context="primary",
                           agent_identity=get_active_profile_name(), agent_workspace="hermes")
    reply({"provider": name, "hermes_home": os.environ.get("HERMES_HOME"),
           "identity": get_active_profile_name(), "store": str(provider._db_path),
           "class": f"{type(provider).__module__}.{type(provider).__name__}",
           "plugin": sys.modules[f"_hermes_user_memory.{name}"].__file__})
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "remember":
            args = {k: cmd[k] for k in ("category", "name", "body")}
            reply(json.loads(manager.handle_tool_call("sibyl_remember", args)))
        elif cmd["op"] == "turn":
            manager.sync_all(cmd["user"], cmd["assistant"])
            reply({"ok": True})
        elif cmd["op"] == "close":
            manager.shutdown_all()
            reply({"closed": True})
            return


if __name__ == "__main__":
    main()
