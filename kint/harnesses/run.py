"""`kint setup`'s run over its targets: `all` expanded in order, the plan made once, every
target set up under the setup lock (two setups at once would each back up and rewrite the
same files), and a target that fails reported while the others carry on.
"""

from __future__ import annotations

from typing import Any

from kint.harnesses.failures import HarnessFailure, SetupError, file_failure
from kint.harnesses.plan import TARGETS, Plan, Report, failed, make_plan
from kint.protocol.errors import ErrorCode

def expand_targets(targets: list[str] | tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for target in targets:
        names = TARGETS if target == "all" else (target,)
        for name in names:
            if name not in TARGETS:
                raise SetupError(f"unknown harness {name!r}",
                                 f"one of: all, {', '.join(TARGETS)}")
            if name not in out:
                out.append(name)
    return out


def run_setup(targets: list[str] | tuple[str, ...], env: dict[str, str],
              hermes_profiles: list[str] | None = None) -> list[Report]:
    """Register kint-server in each target (`all` = claude, codex, hermes, openclaw, in that
    order). A target that fails is reported and the rest carry on. Raises SetupError when
    setup cannot run at all (no kint-server, a refused --env)."""
    from kint.harnesses import claude, codex, hermes, openclaw
    from kint.harnesses.setup_lock import setup_lock
    from kint.paths import UnsafePathError

    names = expand_targets(targets)
    plan = make_plan(env, hermes_profiles)
    try:
        with setup_lock():
            return run_targets(names, plan, explicit="all" not in targets,
                               modules={"claude": claude, "codex": codex, "hermes": hermes,
                                        "openclaw": openclaw})
    except UnsafePathError as err:
        raise SetupError(str(err), err.hint, ErrorCode.BAD_REQUEST) from None


def run_targets(names: list[str], plan: Plan, *, explicit: bool, modules: dict[str, Any]
                ) -> list[Report]:
    reports: list[Report] = []
    for name in names:
        try:
            reports += modules[name].setup(plan, explicit_target=explicit)
        except HarnessFailure as err:
            reports.append(failed(name, err))
        except OSError as err:
            reports.append(failed(name, file_failure(err, "use")))
        except Exception as err:  # noqa: BLE001 - one harness never stops the others
            reports.append(failed(name, HarnessFailure(
                f"{type(err).__name__}: {err}", "this is a bug in kint setup: report it with "
                "this line; the other harnesses were set up", ErrorCode.INTERNAL)))
    return reports
