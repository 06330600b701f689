"""A daqiri gateway's bursts and reorder aggregates, read in place from
another process through the gateway's consumer socket (`daqiri-gateway run
--consumer-socket PATH`). A packet is a read-only buffer: numpy.frombuffer
views it without a copy."""

from collections.abc import Iterator
from os import PathLike

REORDERED: int
"""Burst flag: the burst is one reorder aggregate."""
REORDER_TIMEOUT: int
"""Burst flag: the aggregate was emitted by its queue's timeout before every slot was filled."""

class Ended(ConnectionError):
    """The gateway ended the subscription; the message says why."""

class Refused(ConnectionError):
    """The gateway refused the subscription; the message says why."""

class Packet:
    """One packet, read-only, in the gateway's memory: a buffer of its bytes
    (host memory; numpy.frombuffer views it) and a DLPack producer (host or
    GPU memory; torch.from_dlpack and cupy.from_dlpack view it)."""
    def __len__(self) -> int: ...
    @property
    def flow_id(self) -> int | None: ...
    @property
    def timestamp(self) -> int | None: ...
    @property
    def immediate(self) -> int | None: ...
    @property
    def device(self) -> str:
        """"cpu", or "cuda:N" where the packet lies in GPU memory."""
    def __dlpack__(
        self,
        *,
        stream: object | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> object: ...
    def __dlpack_device__(self) -> tuple[int, int]: ...

class Burst:
    """One burst, in the gateway's memory until released: release() (which
    raises BufferError while a view of a packet is alive), the end of a with
    block (or, with views alive, once the last is gone), or collection."""
    def packets(self) -> list[Packet]: ...
    def __iter__(self) -> Iterator[Packet]: ...
    def __len__(self) -> int: ...
    @property
    def port_queue(self) -> tuple[int, int]: ...
    @property
    def sequence(self) -> int: ...
    @property
    def lost_before(self) -> int: ...
    @property
    def flags(self) -> int:
        """DAQIRI's burst flags (REORDERED, REORDER_TIMEOUT)."""
    @property
    def batch_id(self) -> int | None:
        """A reorder aggregate's batch id; None for other bursts."""
    @property
    def source_packets(self) -> int: ...
    @property
    def aggregate_slots(self) -> int: ...
    @property
    def missing_slots(self) -> list[int]:
        """A reorder aggregate's empty slots (zero-filled), lowest first."""
    def release(self) -> None: ...
    def __enter__(self) -> Burst: ...
    def __exit__(self, *exc: object) -> None: ...

class Subscription:
    """A subscription to one of a gateway's RX queues, flows or reorder plans."""
    def __init__(
        self,
        socket: str | PathLike[str],
        interface: str,
        *,
        queue: int | None = None,
        flow: int | None = None,
        plan: str | None = None,
        slots: int = 256,
        group: str | None = None,
        hold_back: bool = False,
        token: str | None = None,
    ) -> None: ...
    @property
    def id(self) -> int: ...
    def next(self, timeout: float | None = None) -> Burst | None: ...
    def __iter__(self) -> Iterator[Burst]: ...
