"""A kernel client that is ready as soon as the kernel has answered, for warm grading kernels.

jupyter_client's ``wait_for_ready`` asks the kernel for its info until it replies on the shell
channel and IOPub has delivered a message (so both are connected), then reads IOPub until it has
been silent for 0.2 s, to drop the messages of the kernel's start. That silence is waited for
at every kernel's start: 0.2 s a notebook in which neither the grader nor the kernel works.
nbclient needs no such flush: it reads on IOPub only the messages whose parent is its own
request and passes over the rest. ``ReadyKernelClient`` drops what IOPub holds at that moment,
without waiting for more.
"""

import time
from queue import Empty

from jupyter_client.asynchronous import AsyncKernelClient

INFO_WAIT_S = 1.0  # for each kernel_info reply, as jupyter_client waits
IOPUB_WAIT_S = 0.2  # for IOPub's first message, which shows it is connected


class ReadyKernelClient(AsyncKernelClient):
    """An AsyncKernelClient whose ``wait_for_ready`` returns once the kernel answered on the shell
    channel and IOPub, without waiting for IOPub to fall silent."""

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        """Ask for the kernel's info until it answers and IOPub is connected; RuntimeError when the
        kernel dies first or ``timeout`` seconds pass."""
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        while True:
            self.kernel_info()
            try:
                reply = await self.shell_channel.get_msg(timeout=INFO_WAIT_S)
            except Empty:
                reply = None
            if reply is not None and reply["msg_type"] == "kernel_info_reply":
                try:
                    await self.iopub_channel.get_msg(timeout=IOPUB_WAIT_S)
                except Empty:
                    pass  # IOPub not connected yet: ask again
                else:
                    self._handle_kernel_info_reply(reply)
                    break
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:.0f} seconds")
        while await self.iopub_channel.msg_ready():  # what arrived already; nothing waited for
            await self.iopub_channel.get_msg(timeout=0)
