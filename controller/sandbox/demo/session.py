"""What every step of a demo run shares: its output, the stop flag, the `--timeout` bound.

Every wait here is bounded by `--timeout`, looks at the stop flag (raising `Interrupted`) and at
the controller child (raising `DemoError` with its log's tail when it exited).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TextIO

from controller.sandbox.apiserver.server import ApiServer
from controller.sandbox.demo.options import DemoOptions
from controller.sandbox.demo.real import RealDemoServer
from controller.sandbox.demo.supervision import (
    POLL,
    ControllerProcess,
    DemoError,
    Interrupted,
    StopFlag,
    http_status,
    log_tail,
)

#: The API side of a demo run: the in-process emulator, or the real control plane.
DemoApi = ApiServer | RealDemoServer


class Session:
    """The output, stop flag and options of one demo run, and its bounded waits."""

    def __init__(self, options: DemoOptions, flag: StopFlag, out: TextIO) -> None:
        self.options = options
        self.flag = flag
        self.out = out

    def say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def check_stop(self) -> None:
        if self.flag.requested:
            raise Interrupted

    def stop_step(self, what: str, stop: Callable[[], None]) -> None:
        stop()
        self.say(f"stopped {what}")

    def check_alive(self, controller: ControllerProcess) -> None:
        code = controller.exited()
        if code is not None:
            raise DemoError(
                f"the controller exited with code {code}:\n{log_tail(controller.log_path)}"
            )

    def wait_ready(self, controller: ControllerProcess, metrics_port: int) -> None:
        url = f"http://127.0.0.1:{metrics_port}/readyz"
        deadline = time.monotonic() + self.options.timeout
        while http_status(url) != 200:
            code = controller.exited()
            if code is not None:
                raise DemoError(
                    f"the controller exited with code {code} during start-up:\n"
                    f"{log_tail(controller.log_path)}"
                )
            if time.monotonic() > deadline:
                raise DemoError(
                    f"the controller was not ready after {self.options.timeout}s "
                    f"({url}):\n{log_tail(controller.log_path)}"
                )
            if self.flag.wait(POLL):
                raise Interrupted

    def wait_store(
        self,
        server: DemoApi,
        controller: ControllerProcess,
        resource: str,
        namespace: str | None,
        name: str,
        predicate: Callable[[Any], bool],
        what: str,
    ) -> None:
        """Wait, bounded by --timeout, for the controller to bring an object to `predicate`."""
        deadline = time.monotonic() + self.options.timeout
        while True:
            try:
                server.store.wait_for(resource, namespace, name, predicate, timeout=POLL)
                return
            except TimeoutError:
                pass
            self.check_stop()
            self.check_alive(controller)
            if time.monotonic() > deadline:
                raise DemoError(
                    f"the controller did not set {what} on {resource} {name} within "
                    f"{self.options.timeout}s:\n{log_tail(controller.log_path)}"
                )
