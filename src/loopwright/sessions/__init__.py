"""Session storage: metadata, append-only transcripts and run reports."""

from loopwright.sessions._codec import Entry, TranscriptRecord, decode_line, encode_entry, entry_to_dict
from loopwright.sessions.base import (
    LoadedTranscript,
    SessionInfo,
    SessionStore,
    new_session_id,
    validate_session_id,
)
from loopwright.sessions.file import FileSessionStore
from loopwright.sessions.memory import MemorySessionStore
from loopwright.sessions.transfer import SNAPSHOT_FORMAT, export_session, fork_session, import_session

__all__ = [
    "SNAPSHOT_FORMAT",
    "Entry",
    "FileSessionStore",
    "LoadedTranscript",
    "MemorySessionStore",
    "SessionInfo",
    "SessionStore",
    "TranscriptRecord",
    "decode_line",
    "encode_entry",
    "entry_to_dict",
    "export_session",
    "fork_session",
    "import_session",
    "new_session_id",
    "validate_session_id",
]
