"""The kernel's in-kernel API for synthetic and dynamic events, in Python.

Owns: ``_api`` (``synth_event_*``, ``kprobe_event_*``, ``trace_*`` under the
kernel's names, driving a served engine).
May import: ``engine``, ``lib``.
"""

from ._api import MAX_DYNEVENT_CMD_LEN as MAX_DYNEVENT_CMD_LEN
from ._api import DynEventCmd as DynEventCmd
from ._api import DynEventType as DynEventType
from ._api import EventFileRef as EventFileRef
from ._api import SynthFieldDesc as SynthFieldDesc
from ._api import SynthTraceState as SynthTraceState
from ._api import TracefsError as TracefsError
from ._api import current_task as current_task
from ._api import synth_event_cmd_init as synth_event_cmd_init
from ._api import synth_event_gen_cmd_start as synth_event_gen_cmd_start
from ._api import synth_event_gen_cmd_array_start as synth_event_gen_cmd_array_start
from ._api import synth_event_add_field as synth_event_add_field
from ._api import synth_event_add_field_str as synth_event_add_field_str
from ._api import synth_event_add_fields as synth_event_add_fields
from ._api import synth_event_gen_cmd_end as synth_event_gen_cmd_end
from ._api import synth_event_create as synth_event_create
from ._api import synth_event_delete as synth_event_delete
from ._api import kprobe_event_cmd_init as kprobe_event_cmd_init
from ._api import kprobe_event_gen_cmd_start as kprobe_event_gen_cmd_start
from ._api import kretprobe_event_gen_cmd_start as kretprobe_event_gen_cmd_start
from ._api import kprobe_event_add_field as kprobe_event_add_field
from ._api import kprobe_event_add_fields as kprobe_event_add_fields
from ._api import kprobe_event_gen_cmd_end as kprobe_event_gen_cmd_end
from ._api import kretprobe_event_gen_cmd_end as kretprobe_event_gen_cmd_end
from ._api import kprobe_event_delete as kprobe_event_delete
from ._api import dynevent_create as dynevent_create
from ._api import trace_get_event_file as trace_get_event_file
from ._api import trace_put_event_file as trace_put_event_file
from ._api import trace_array_set_clr_event as trace_array_set_clr_event
from ._api import synth_event_trace as synth_event_trace
from ._api import synth_event_trace_array as synth_event_trace_array
from ._api import synth_event_trace_start as synth_event_trace_start
from ._api import synth_event_add_next_val as synth_event_add_next_val
from ._api import synth_event_add_val as synth_event_add_val
from ._api import synth_event_trace_end as synth_event_trace_end

__all__ = [
    "MAX_DYNEVENT_CMD_LEN",
    "DynEventCmd",
    "DynEventType",
    "EventFileRef",
    "SynthFieldDesc",
    "SynthTraceState",
    "TracefsError",
    "current_task",
    "synth_event_cmd_init",
    "synth_event_gen_cmd_start",
    "synth_event_gen_cmd_array_start",
    "synth_event_add_field",
    "synth_event_add_field_str",
    "synth_event_add_fields",
    "synth_event_gen_cmd_end",
    "synth_event_create",
    "synth_event_delete",
    "kprobe_event_cmd_init",
    "kprobe_event_gen_cmd_start",
    "kretprobe_event_gen_cmd_start",
    "kprobe_event_add_field",
    "kprobe_event_add_fields",
    "kprobe_event_gen_cmd_end",
    "kretprobe_event_gen_cmd_end",
    "kprobe_event_delete",
    "dynevent_create",
    "trace_get_event_file",
    "trace_put_event_file",
    "trace_array_set_clr_event",
    "synth_event_trace",
    "synth_event_trace_array",
    "synth_event_trace_start",
    "synth_event_add_next_val",
    "synth_event_add_val",
    "synth_event_trace_end",
]
