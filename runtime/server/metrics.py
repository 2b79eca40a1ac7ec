"""GET /metrics: requests, latency and queue length in Prometheus' text format (version 0.0.4).

Counters and a latency histogram kept in memory, per endpoint and status; the queue and running
gauges and model loads are read from the model pool when scraped.
"""

from __future__ import annotations

import threading
from collections import defaultdict

# Seconds: from a fraction of a second (a cached model, short audio) to the default timeout.
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
CLIENT_CLOSED = 499  # the status recorded for a request whose client went away (nginx's)


class Metrics:
    def __init__(self):
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, int], int] = defaultdict(int)
        self.buckets: dict[str, list[int]] = defaultdict(lambda: [0] * len(LATENCY_BUCKETS))
        self.latency_sum: dict[str, float] = defaultdict(float)
        self.latency_count: dict[str, int] = defaultdict(int)

    def observe(self, endpoint: str, status: int, seconds: float) -> None:
        with self._lock:
            self.requests[(endpoint, status)] += 1
            counts = self.buckets[endpoint]
            for i, bound in enumerate(LATENCY_BUCKETS):
                if seconds <= bound:
                    counts[i] += 1
            self.latency_sum[endpoint] += seconds
            self.latency_count[endpoint] += 1

    def render(self, slots) -> str:
        """The exposition text; ``slots``: the model pool's slots (queue, running, loads)."""
        lines: list[str] = []

        def family(name: str, kind: str, help: str) -> None:
            lines.append(f"# HELP {name} {help}")
            lines.append(f"# TYPE {name} {kind}")

        with self._lock:
            family("oasr_requests_total", "counter", "Requests answered, by endpoint and HTTP status (499: the client went away).")
            for (endpoint, status), n in sorted(self.requests.items()):
                lines.append(f'oasr_requests_total{{endpoint="{_label(endpoint)}",status="{status}"}} {n}')
            family("oasr_request_duration_seconds", "histogram", "Seconds from a request's arrival to its answer, by endpoint.")
            for endpoint in sorted(self.buckets):
                label = _label(endpoint)
                for bound, n in zip(LATENCY_BUCKETS, self.buckets[endpoint]):
                    lines.append(f'oasr_request_duration_seconds_bucket{{endpoint="{label}",le="{bound:g}"}} {n}')
                lines.append(f'oasr_request_duration_seconds_bucket{{endpoint="{label}",le="+Inf"}} {self.latency_count[endpoint]}')
                lines.append(f'oasr_request_duration_seconds_sum{{endpoint="{label}"}} {self.latency_sum[endpoint]:.6f}')
                lines.append(f'oasr_request_duration_seconds_count{{endpoint="{label}"}} {self.latency_count[endpoint]}')
        slots = sorted(slots, key=lambda s: s.name)
        for name, kind, help, attr in (
            ("oasr_queue_length", "gauge", "Requests waiting for their model, by model.", "waiting"),
            ("oasr_running", "gauge", "Requests running on their model now, by model.", "running"),
            ("oasr_model_loads_total", "counter", "Times a model's weights were loaded, by model.", "loads"),
        ):
            family(name, kind, help)
            for s in slots:
                lines.append(f'{name}{{model="{_label(s.name)}"}} {getattr(s, attr)}')
        return "\n".join(lines) + "\n"


def _label(value: str) -> str:
    """A Prometheus label value: backslash, quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
