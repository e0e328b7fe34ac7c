"""Chat platforms: users, budgets, personas and conversations on SQL storage.

A bot adapter (Discord, Slack, ...) turns each message into an :class:`IncomingMessage` and gets a
:class:`PlatformResponse` from :meth:`PlatformService.handle`; see docs/platforms.md.
"""

from loopwright.platforms.budgets import BUDGET_EXCEEDED, Budgets, BudgetStatus, period_end
from loopwright.platforms.conversations import ConversationInfo, resolve_conversation
from loopwright.platforms.files import FileAccess, FileInfo, describe_files, produced_files, read_file_tool
from loopwright.platforms.incoming import (
    Attachment,
    FileOut,
    IncomingMessage,
    PlatformResponse,
    parse_incoming,
)
from loopwright.platforms.levels import LEVELS, Level, parse_level
from loopwright.platforms.personas import (
    UNSET,
    PersonaInfo,
    create_persona,
    edit_persona,
    get_persona,
    list_personas,
    resolve_persona,
)
from loopwright.platforms.service import PlatformService
from loopwright.platforms.usage import UsageRow, usage_report
from loopwright.platforms.users import (
    DEFAULT_GUEST_BUDGET,
    UserInfo,
    find_user,
    get_user,
    link_platform,
    list_users,
    resolve_user,
    set_budget,
    set_permission,
)

__all__ = [
    "BUDGET_EXCEEDED",
    "DEFAULT_GUEST_BUDGET",
    "LEVELS",
    "UNSET",
    "Attachment",
    "BudgetStatus",
    "Budgets",
    "ConversationInfo",
    "FileAccess",
    "FileInfo",
    "FileOut",
    "IncomingMessage",
    "Level",
    "PersonaInfo",
    "PlatformResponse",
    "PlatformService",
    "UsageRow",
    "UserInfo",
    "create_persona",
    "describe_files",
    "edit_persona",
    "find_user",
    "get_persona",
    "get_user",
    "link_platform",
    "list_personas",
    "list_users",
    "parse_incoming",
    "parse_level",
    "period_end",
    "produced_files",
    "read_file_tool",
    "resolve_conversation",
    "resolve_persona",
    "resolve_user",
    "set_budget",
    "set_permission",
    "usage_report",
]
