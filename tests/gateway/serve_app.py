"""A gateway in its own process, for the shutdown and restart tests.

``python -m tests.gateway.serve_app WORKSPACE GRACE``: serves agent ``gated`` (model "test") whose
tool ``hold`` waits until the file ``WORKSPACE/open`` exists; prints the URL once listening.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from loopwright import Agent
from loopwright.gateway import Gateway, GatewayConfig, serve
from loopwright.tools import tool


def main() -> None:
    workspace, grace = Path(sys.argv[1]), float(sys.argv[2])

    @tool(timeout=300)
    async def hold(note: str) -> str:
        """Wait until the test lets go."""
        while not (workspace / "open").exists():  # noqa: ASYNC110 - the gate is a file another process creates
            await asyncio.sleep(0.02)
        return f"released {note}"

    agent = Agent("test", workspace=workspace, tools=[hold], name="gated")
    gateway = Gateway({"gated": agent}, config=GatewayConfig(port=0, grace=grace))
    serve(gateway, on_ready=lambda url: print(url, flush=True))
    print("drained", flush=True)


if __name__ == "__main__":
    main()
