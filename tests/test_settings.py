"""x64guard.settings: the mode is plain Python (no framework loaded to read or set it), and
a front end's mirror of it (the JAX front end's configuration state) stays equal to it,
including in `mode(...)` blocks already open when the mirror is added. Each case runs in a
fresh interpreter: a mirror, once added, stays for the process."""

from __future__ import annotations

from tests.support.child import run_json


def test_mode_is_read_and_set_without_loading_a_framework():
    out = run_json("""
        import json, sys, threading
        import x64guard
        seen = {"start": x64guard.current_mode().value}
        with x64guard.mode("allow"):
            seen["block"] = x64guard.current_mode().value
            other = []
            thread = threading.Thread(target=lambda: other.append(x64guard.current_mode().value))
            thread.start(); thread.join()
            seen["other_thread"] = other[0]
        x64guard.set_mode("allow")
        seen["default"] = x64guard.current_mode().value
        seen["frameworks"] = sorted(m for m in ("jax", "torch") if m in sys.modules)
        print(json.dumps(seen))
    """, env={"X64GUARD_MODE": "error"})
    assert out == {"start": "error", "block": "allow", "other_thread": "error", "default": "allow",
                   "frameworks": []}


def test_a_mirror_added_inside_open_blocks_follows_them_and_is_restored():
    out = run_json("""
        import contextlib, json
        from x64guard import settings

        log = []

        class Mirror:
            def __init__(self, default):
                self.value = default.value
            def set_default(self, mode):
                self.value = mode.value
            @contextlib.contextmanager
            def override(self, mode):
                before, self.value = self.value, mode.value
                try:
                    yield
                finally:
                    self.value = before

        mirrors = []
        with settings.mode("allow"):
            with settings.mode("error"):
                settings.add_mirror("test", lambda default: mirrors.append(Mirror(default)) or mirrors[0])
                settings.add_mirror("test", lambda default: 1 / 0)  # once per name
                log.append(mirrors[0].value)
            log.append(mirrors[0].value)
            with settings.mode("warn"):
                log.append(mirrors[0].value)
            log.append(mirrors[0].value)
        log.append(mirrors[0].value)
        settings.set_mode("error")
        log.append(mirrors[0].value)
        print(json.dumps(log))
    """)
    assert out == ["error", "allow", "warn", "allow", "warn", "error"]


def test_the_jax_front_end_mirrors_the_mode_into_jax_config_when_first_used():
    out = run_json("""
        import json
        import jax
        import x64guard
        seen = {"before": "x64guard_mode" in jax.config.values}
        with x64guard.mode("allow"):
            x64guard.jit  # loads the JAX front end inside the block
            seen["block"] = jax.config._read("x64guard_mode")
        seen["after"] = jax.config._read("x64guard_mode")
        print(json.dumps(seen))
    """, env={"JAX_PLATFORMS": "cpu", "X64GUARD_MODE": "warn"})
    assert out == {"before": False, "block": "allow", "after": "warn"}
