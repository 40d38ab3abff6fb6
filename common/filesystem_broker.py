"""The embedded broker: Kombu's file-system transport, with messages that appear whole and are taken once.

Kombu's writer creates a message file in the queue folder and only then writes it, and its reader takes any file
it lists: a reader that comes in between reads an empty message and the worker stops on the decoding error
("Unrecoverable error: JSONDecodeError", https://github.com/celery/kombu/issues/1551, open; under load every
worker of `make run` did; `tests/site/test_filesystem_broker.py` shows Kombu's own transport doing it). Here a
message is written under a name no reader takes and renamed into place (a rename within a folder is atomic), and
a reader claims a file by renaming it into the processed folder on the same file system, so it reads whole files
only and two workers never both take one. A file that still does not decode is dropped with a warning: the
database row is the truth, and the sweeper enqueues again what is due.
"""

from __future__ import annotations

import logging
import os
import uuid
from time import monotonic
from typing import Any

from kombu.transport import filesystem  # type: ignore[attr-defined]  # not in the stubs
from kombu.utils import json as kombu_json

logger = logging.getLogger(__name__)

STAGING_SUFFIX = ".part"  # never ends a message a reader takes (those end in ".<queue>.msg")


class Channel(filesystem.Channel):
    """A file-system channel whose messages are published by rename and claimed by rename."""

    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        """Write the message beside the queue under a staging name, then rename it into the queue."""
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        staging = os.path.join(self.data_folder_out, f".{uuid.uuid4()}{STAGING_SUFFIX}")
        try:
            with open(staging, "wb") as f:
                f.write(kombu_json.dumps(payload).encode())  # type: ignore[call-arg]  # the stubs miss the defaults
            os.replace(staging, final)
        except OSError as exc:
            raise filesystem.ChannelError(f"Cannot add file {final!r} to directory") from exc

    def _get(self, queue: str) -> Any:
        """Claim the oldest message of `queue` by renaming it out of the queue; read and remove it."""
        suffix = f".{queue}.msg"
        claimed_folder = self.processed_folder if os.path.isdir(self.processed_folder) else self.data_folder_in
        for filename in sorted(os.listdir(self.data_folder_in)):
            if not filename.endswith(suffix):
                continue
            claimed = os.path.join(claimed_folder, f"{filename}.{uuid.uuid4()}.claimed")
            try:
                os.rename(os.path.join(self.data_folder_in, filename), claimed)
            except OSError:
                continue  # another worker took it first
            try:
                with open(claimed, "rb") as f:
                    payload = f.read()
            finally:
                os.remove(claimed)
            try:
                return kombu_json.loads(payload.decode())  # type: ignore[call-arg]
            except ValueError:
                logger.warning("Dropped an unreadable message file %s from queue %s.", filename, queue)
        raise filesystem.Empty()


class Transport(filesystem.Transport):
    """Kombu's file-system transport with the channel above (`CELERY_BROKER_TRANSPORT` names it)."""

    Channel = Channel
