"""Speed benchmark of memsearch: search latency (process and in-process) and import throughput.

Targets (medians; each figure also shows min and max):

1. a fresh `memsearch search --mode hybrid QUERY --db STORE --format json` process against a
   10k-memory store: <= 0.6 s wall time; `memsearch --help`: <= 0.4 s;
2. in-process hybrid search through the API, per query after a warm-up: <= 25 ms at 10k
   memories, <= 100 ms at 100k;
3. import into an empty store, embedding included: >= 150 memories/s, through the
   `memsearch import` process (wall time: process start and model load included) and
   through `Memsearch.add_many`.

The corpus is synthetic but shaped like an agent's memory (notes, decisions, bug fixes,
preferences, meeting facts, error messages with identifiers, paths, versions), made from
templates and word lists with a fixed seed. Built stores and their embeddings are cached
under --out, keyed by size, seed and generator version, so reruns skip the slow part.

Run `python bench/bench.py --help`; see bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import random
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

GENERATOR_VERSION = 1  # bump when the corpus generator changes: cached stores are keyed by it
HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "out"
DEFAULT_CACHE = Path("/tmp/memsearch-bench-cache")
EMBED_CHUNK = 5000
BUSY = 0.3  # CPUs other processes may keep busy before a figure counts as disturbed

# -- word lists -------------------------------------------------------------------------------

PROJECTS = (
    "atlas", "billing-api", "orion-web", "hermes-worker", "ledger", "pixel-pipeline", "quill-docs",
    "nimbus-infra", "sentinel", "kite-mobile", "harbor", "lumen-search", "tessera", "vega-analytics",
    "cobalt-auth", "driftwood", "marigold-etl", "paperplane", "raven-cli", "summit-dashboard",
)  # fmt: skip
TICKET_PREFIX = {p: re.sub(r"[^A-Z]", "", p.upper())[:4] or "GEN" for p in PROJECTS}
NAMESPACES = ("work", "work", "work", "agent", "agent", "personal", "team-notes")
PEOPLE = (
    "Alice", "Bob", "Priya", "Chen", "Marta", "Jonas", "Fatima", "Diego", "Yuki", "Olu", "Sven", "Leila",
    "Tomasz", "Aisha", "Ravi", "Noor", "Hannah", "Mateo", "Ingrid", "Kwame", "Sofia", "Dmitri", "Grace",
    "Arjun", "Beatriz", "Emeka", "Lena", "Pierre", "Zara", "Hugo",
)  # fmt: skip
TOOLS = (
    ("postgres", ("13.11", "14.9", "15.4", "16.2")), ("redis", ("6.2.14", "7.0.15", "7.2.4")),
    ("kafka", ("3.4.1", "3.6.0", "3.7.0")), ("docker", ("24.0.7", "25.0.3", "26.1.1")),
    ("kubernetes", ("1.27", "1.28", "1.29", "1.30")), ("terraform", ("1.5.7", "1.6.6", "1.7.5")),
    ("nginx", ("1.24.0", "1.25.4")), ("celery", ("5.2.7", "5.3.6", "5.4.0")), ("pytest", ("7.4.4", "8.0.2", "8.2.1")),
    ("ruff", ("0.3.4", "0.4.8", "0.5.7")), ("mypy", ("1.8.0", "1.10.0")), ("node", ("18.19.0", "20.11.1", "22.2.0")),
    ("python", ("3.10.13", "3.11.9", "3.12.3")), ("django", ("4.2.11", "5.0.4")), ("fastapi", ("0.109.2", "0.110.1")),
    ("sqlalchemy", ("1.4.52", "2.0.29")), ("react", ("18.2.0", "18.3.1")), ("vite", ("5.1.4", "5.2.8")),
    ("webpack", ("5.90.3",)), ("elasticsearch", ("7.17.18", "8.12.2", "8.13.0")), ("rabbitmq", ("3.12.13", "3.13.1")),
    ("grafana", ("10.3.3", "10.4.1")), ("prometheus", ("2.49.1", "2.51.0")), ("sentry-sdk", ("1.40.6", "2.1.1")),
    ("pydantic", ("1.10.14", "2.6.4", "2.7.1")), ("grpcio", ("1.62.1", "1.63.0")), ("openssl", ("3.0.13", "3.2.1")),
    ("uv", ("0.1.24", "0.2.5")), ("poetry", ("1.7.1", "1.8.2")), ("sqlite", ("3.45.1", "3.45.3")),
)  # fmt: skip
SERVICES = (
    "payments service", "auth gateway", "search indexer", "notification worker", "CI runner", "billing cron",
    "webhook dispatcher", "image resizer", "export job", "feature-flag service", "session store", "API gateway",
    "email sender", "report generator", "sync daemon", "metrics exporter",
)  # fmt: skip
FEATURES = (
    "CSV export", "dark mode", "SSO login", "rate limiting", "webhook retries", "bulk invoice download",
    "search autocomplete", "audit log", "two-factor auth", "usage-based pricing", "offline mode", "team invites",
    "PDF receipts", "data retention policy", "password reset flow", "saved filters", "API keys page",
    "Slack integration", "onboarding checklist", "multi-currency support",
)  # fmt: skip
TOPICS = (
    "the Q3 roadmap", "the on-call rotation", "the database migration plan", "the hiring loop", "the pricing change",
    "the incident postmortem", "the API versioning policy", "the monorepo split", "the SOC 2 audit",
    "the mobile release train", "the observability budget", "the deprecation of v1 endpoints", "the design review",
    "the load test results", "the vendor contract renewal", "the data warehouse cost",
)  # fmt: skip
ENVS = ("staging", "production", "dev", "canary", "the preview environment", "CI")
DIRS = (
    "src", "app", "lib", "services", "internal", "pkg", "web/src", "api", "workers", "scripts", "infra/terraform",
    "deploy/k8s", "tests", "config", "frontend/components", "backend", "tools",
)  # fmt: skip
NOUNS = (
    "invoice", "user", "session", "token", "order", "payment", "webhook", "retry", "cache", "config", "report",
    "schema", "queue", "job", "account", "profile", "export", "import", "index", "query", "event", "metric",
    "customer", "ledger", "batch", "upload", "thumbnail", "permission", "tenant", "subscription", "coupon",
)  # fmt: skip
VERBS = (
    "parse", "load", "fetch", "build", "render", "validate", "sync", "refresh", "resolve", "compute", "send",
    "apply", "merge", "flush", "retry", "normalize", "serialize", "dispatch", "reconcile", "migrate", "encode",
)  # fmt: skip
EXTS = (".py", ".py", ".py", ".ts", ".tsx", ".go", ".rs", ".yaml", ".toml", ".sql", ".json", ".md", ".tf", ".sh")
ERROR_CODES = (
    "ECONNRESET", "ECONNREFUSED", "ETIMEDOUT", "ENOENT", "EACCES", "EADDRINUSE", "OOMKilled", "SIGSEGV",
    "CrashLoopBackOff", "ImagePullBackOff", "HTTP 502", "HTTP 503", "HTTP 429", "HTTP 401", "E11000", "ORA-00942",
)  # fmt: skip
EXCEPTIONS = (
    "KeyError: '{field}'",
    "TypeError: 'NoneType' object is not subscriptable",
    "AttributeError: 'dict' object has no attribute '{field}'",
    "ValueError: invalid literal for int() with base 10: '{word}'",
    "ModuleNotFoundError: No module named '{module}'",
    "psycopg2.errors.DeadlockDetected",
    "psycopg2.errors.UniqueViolation: duplicate key value violates unique constraint \"{table}_pkey\"",
    "sqlalchemy.exc.TimeoutError: QueuePool limit of size 5 overflow 10 reached",
    "TypeError: Cannot read properties of undefined (reading '{field}')",
    "x509: certificate has expired or is not yet valid",
    "panic: runtime error: index out of range [{n}] with length {n2}",
    "java.lang.OutOfMemoryError: Java heap space",
    "RecursionError: maximum recursion depth exceeded",
    "UnicodeDecodeError: 'utf-8' codec can't decode byte 0x{hex2} in position {n}",
    "redis.exceptions.ConnectionError: Error 111 connecting to localhost:6379",
    "fatal: refusing to merge unrelated histories",
)  # fmt: skip
FIELDS = ("customer_id", "tenant", "amount_cents", "email", "created_at", "items", "currency", "status", "user_id")
MODULES = ("yaml", "boto3", "orjson", "pydantic_settings", "httpx", "tomli", "dateutil", "jwt")
PREFS = (
    "short commit messages in the imperative mood", "pytest over unittest", "a dark theme in the terminal",
    "type hints on every public function", "rebasing instead of merge commits", "snake_case keys in JSON APIs",
    "answers as bullet points", "British spelling in the docs", "small pull requests under 300 lines",
    "tabs rendered four spaces wide", "explicit imports over wildcard imports", "dataclasses over plain dicts",
    "uv instead of pip for new projects", "squash merges on main", "logging in JSON lines", "vim keybindings",
    "ISO dates (YYYY-MM-DD) everywhere", "no emoji in commit messages", "one sentence per line in Markdown",
    "running the tests before every push", "f-strings over str.format", "24-hour time in meeting notes",
)  # fmt: skip
PREF_AREAS = ("commit messages", "testing", "code style", "git workflow", "docs", "editor setup", "meetings")
PURPOSES = (
    "background jobs", "caching", "the message queue", "feature flags", "secrets management", "the search backend",
    "local development", "load testing", "dependency management", "database migrations", "error tracking",
    "dashboards", "end-to-end tests", "packaging", "the deployment pipeline",
)  # fmt: skip
REASONS = (
    "it halves the cold start time", "the old one is unmaintained", "the team already knows it",
    "it costs less at our volume", "it supports {feature} out of the box", "the licence changed",
    "it removed a whole class of {error} errors", "benchmarks showed {pct}% lower p99 latency",
    "{person} had a bad experience with the alternative", "it runs fine on {tool} {version}",
    "it keeps the Docker image under {n} MB",
)  # fmt: skip
CAUSES = (
    "a race between two workers writing the same {noun}", "a missing index on {table}.{field}",
    "the connection pool being too small for the {service}", "an off-by-one in the pagination cursor",
    "a timezone bug: created_at was stored in local time", "a stale cache entry that never expired",
    "the retry loop not backing off", "an unpinned dependency pulling {tool} {version}",
    "a None {field} coming from the old API", "the health check hitting the database on every call",
    "a memory leak in the {noun} decoder", "the TLS certificate on {env} not being renewed",
)  # fmt: skip
FIXES = (
    "adding a unique constraint and retrying on conflict", "raising the pool size to {n}",
    "pinning {tool} to {version}", "wrapping the call in {func}()", "moving the work to the {service}",
    "adding an index on {table}.{field}", "switching to exponential backoff with jitter",
    "normalising timestamps to UTC in {func}()", "caching the result for {n} seconds",
    "reverting commit {commit}", "splitting the batch into chunks of {n}",
)  # fmt: skip
SYMPTOMS = (
    "timeouts on every third request", "duplicate emails sent to customers",
    "the dashboard showing yesterday's numbers",
    "CPU pinned at 100% after deploys", "intermittent 502s from the load balancer", "invoices rendered twice",
    "logins failing for SSO users", "the queue backing up to {n} jobs", "tests flaking only in CI",
    "memory growing until the pod is OOMKilled", "slow page loads on the {feature} screen",
)  # fmt: skip
OUTCOMES = (
    "we postpone it by two sprints", "{person} owns the follow-up", "we go ahead with option B",
    "budget approved for {n} more hours", "nobody objected, ship it on {date}", "we need numbers before deciding",
    "the scope shrinks to {feature} only", "{person} and {person2} will pair on it",
)  # fmt: skip
ACTIONS = (
    "remove the legacy {noun} endpoint", "rename {func} to {func2}", "add tests for {func}",
    "migrate {table} to the new schema", "bump {tool} to {version}", "delete the feature flag for {feature}",
    "document the env vars of the {service}", "split {path} into smaller modules", "rotate the {service} credentials",
)  # fmt: skip
CONDITIONS = (
    "the payload is larger than {n} KB", "two deploys overlap", "the user has no {field}", "DST changes",
    "the cache is cold", "it runs under {tool} {version}", "the tenant has more than {n} seats",
    "the request comes through the {service}", "the locale is not en-US",
)  # fmt: skip
TAGS = (
    "urgent", "infra", "frontend", "backend", "db", "security", "perf", "docs", "ci", "oncall", "customer",
    "tech-debt", "release", "api", "mobile", "billing", "followup",
)  # fmt: skip
TIMEZONES = ("Europe/Berlin", "America/New_York", "Asia/Tokyo", "Europe/Lisbon", "America/Los_Angeles", "Asia/Kolkata")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October")


class Gen:
    """Fills templates from the word lists with one seeded random stream."""

    def __init__(self, rng: random.Random) -> None:
        self.r = rng
        self.project = rng.choice(PROJECTS)

    def pick(self, items: Sequence[Any]) -> Any:
        return self.r.choice(items)

    def tool_version(self) -> tuple[str, str]:
        name, versions = self.pick(TOOLS)
        return name, self.pick(versions)

    def func(self) -> str:
        verb, noun, noun2 = self.pick(VERBS), self.pick(NOUNS), self.pick(NOUNS)
        style = self.r.random()
        if style < 0.55:
            return f"{verb}_{noun}" + (f"_{noun2}" if self.r.random() < 0.4 else "")
        if style < 0.85:
            return f"{verb}{noun.title()}" + (noun2.title() if self.r.random() < 0.4 else "")
        return f"{noun.title()}{noun2.title()}.{verb}"

    def path(self) -> str:
        parts = [self.pick(DIRS)]
        if self.r.random() < 0.6:
            parts.append(self.pick(NOUNS) + ("s" if self.r.random() < 0.3 else ""))
        ext = self.pick(EXTS)
        stem = f"{self.pick(NOUNS)}_{self.pick(('service', 'handler', 'utils', 'models', 'client', 'views', 'tasks'))}"
        if ext == ".tsx":
            stem = "".join(w.title() for w in stem.split("_"))
        return "/".join(parts) + "/" + stem + ext

    def ticket(self, project: str | None = None) -> str:
        return f"{TICKET_PREFIX[project or self.project]}-{self.r.randint(10, 4999)}"

    def commit(self) -> str:
        return f"{self.r.getrandbits(28):07x}"

    def error(self) -> str:
        if self.r.random() < 0.45:
            return self.pick(ERROR_CODES)
        return self.fill(self.pick(EXCEPTIONS))

    def date(self) -> str:
        style = self.r.random()
        if style < 0.4:
            return f"2025-{self.r.randint(1, 12):02d}-{self.r.randint(1, 28):02d}"
        if style < 0.7:
            return f"{self.pick(MONTHS)} {self.r.randint(1, 28)}"
        return f"{self.pick(('next', 'last', 'this'))} {self.pick(WEEKDAYS)}"

    def command(self) -> str:
        return self.pick(
            (
                f"make -C {self.pick(DIRS)} test",
                f"docker compose up {self.pick(SERVICES).split()[0]}",
                f"kubectl rollout restart deploy/{self.project}",
                f"uv run pytest -k {self.func().split('.')[0]} -x",
                f"terraform plan -target=module.{self.pick(NOUNS)}",
                f"./scripts/{self.pick(VERBS)}_{self.pick(NOUNS)}.sh --env {self.pick(('staging', 'prod'))}",
                f"alembic upgrade head && python -m {self.project.replace('-', '_')}.{self.pick(VERBS)}",
                f"npm run build -- --mode {self.pick(('staging', 'production'))}",
            )
        )

    def fill(self, template: str) -> str:
        tool, version = self.tool_version()
        values = {
            "project": self.project,
            "project2": self.pick(PROJECTS),
            "person": self.pick(PEOPLE),
            "person2": self.pick(PEOPLE),
            "tool": tool,
            "version": version,
            "tool2": self.pick(TOOLS)[0],
            "service": self.pick(SERVICES),
            "feature": self.pick(FEATURES),
            "topic": self.pick(TOPICS),
            "env": self.pick(ENVS),
            "noun": self.pick(NOUNS),
            "table": self.pick(NOUNS) + "s",
            "field": self.pick(FIELDS),
            "module": self.pick(MODULES),
            "word": self.pick(NOUNS),
            "func": self.func(),
            "func2": self.func(),
            "path": self.path(),
            "ticket": self.ticket(),
            "commit": self.commit(),
            "date": self.date(),
            "n": self.r.choice((2, 3, 5, 8, 10, 12, 20, 30, 50, 64, 100, 128, 250, 500, 1000, 4096)),
            "n2": self.r.randint(1, 64),
            "pct": self.r.randint(5, 70),
            "hex2": f"{self.r.randint(128, 255):x}",
            "pref": self.pick(PREFS),
            "purpose": self.pick(PURPOSES),
            "tz": self.pick(TIMEZONES),
            "command": self.command() if "{command}" in template else "",
            "error": self.error() if "{error}" in template else "",
        }
        for slot, pool in (
            ("reason", REASONS),
            ("cause", CAUSES),
            ("fix", FIXES),
            ("symptom", SYMPTOMS),
            ("outcome", OUTCOMES),
            ("action", ACTIONS),
            ("condition", CONDITIONS),
        ):
            if "{" + slot + "}" in template:
                values[slot] = self.fill(self.pick(pool))
        return template.format(**values)


KINDS: dict[str, tuple[float, tuple[str, ...]]] = {
    "note": (
        0.18,
        (
            "{project}: the {feature} code lives in {path}; the entry point is {func}().",
            "Reminder: {env} runs {tool} {version}, not the version the README says.",
            "The {service} reads its settings from {path} and falls back to environment variables.",
            "{project} uses {tool} for {purpose}.",
            "Handy: `{command}` rebuilds everything for {project} in about {n2} minutes.",
            "{func}() in {path} is the only place that writes to the {table} table.",
            "Ownership: {person} owns the {service}; {person2} is the backup.",
            "The {feature} screen of {project} calls {func}() on every keystroke, which is why it feels slow.",
        ),
    ),
    "decision": (
        0.14,
        (
            "Decided to use {tool} instead of {tool2} for {purpose} in {project} because {reason}.",
            "We agreed with {person} to freeze {feature} until {date}.",
            "ADR-{n2}: {project} will {action}; reason: {reason}.",
            "Decision: {project} stays on {tool} {version} for now, upgrade after {topic} is settled.",
            "Going with {tool2} for {purpose}; {person} signed off on {date}.",
            "We will not build {feature} this quarter: {reason} does not outweigh the cost.",
        ),
    ),
    "bugfix": (
        0.18,
        (
            "Fixed {error} in {func}() ({path}): the cause was {cause}. The fix was {fix}.",
            "Bug {ticket}: {symptom} on {env}; root cause {cause}; fixed in commit {commit}.",
            "{project} {ticket} closed: {symptom} came from {cause}.",
            "Hotfix for {symptom} shipped to {env}: {fix}.",
            "The flaky test in {path} was {cause}; fixed by {fix}.",
        ),
    ),
    "preference": (
        0.12,
        (
            "User prefers {pref}.",
            "{person} prefers {pref}.",
            "Always use {pref} when working on {project}.",
            "The user asked twice for {pref}; do not forget it.",
            "Preference: {pref}. Also likes {tool} over {tool2} for {purpose}.",
        ),
    ),
    "meeting": (
        0.14,
        (
            "Meeting with {person} and {person2} on {date} about {topic}: {outcome}.",
            "Standup {date}: {person} is blocked on {ticket} ({symptom}).",
            "1:1 with {person}: wants to move to the {service} team after {topic}.",
            "Retro notes for {project}: {symptom} hurt us; action item for {person}: {action}.",
            "{person}'s timezone is {tz}; calls work best before noon there.",
            "Sync on {topic} moved to {date}; {person2} will send the agenda.",
        ),
    ),
    "error": (
        0.14,
        (
            "Seen `{error}` when running `{command}` on {env}.",
            "{tool} {version} raises {error} if {condition}.",
            "`{error}` in the {service} logs means {cause}; restart does not help.",
            "If `{command}` fails with {error}, it is usually {cause}.",
            "{error} at {path} line {n2} in {project} after upgrading to {tool} {version}.",
        ),
    ),
    "todo": (
        0.10,
        (
            "TODO: {action} in {path} before the {version} release.",
            "Follow up with {person} about {feature} on {date}.",
            "Need to {action} ({ticket}).",
            "Released {project} {version} to {env} on {date}; changelog: {feature} and the fix for {ticket}.",
        ),
    ),
}
KIND_NAMES = tuple(KINDS)
KIND_WEIGHTS = tuple(weight for weight, _ in KINDS.values())
DETAILS = (
    "This affected about {n} customers.",
    "{person} reviewed it.",
    "See {ticket} for the whole discussion.",
    "The workaround until then is to {action}.",
    "p99 latency went from {n2}0 ms to {n2} ms after the change.",
    "Follow up with {person} on {date}.",
    "Related file: {path}.",
    "It only happens when {condition}.",
    "Tested on {tool} {version} and {tool2}.",
    "Note that {cause} can cause the same symptom.",
    "Logs are in /var/log/{project}/{noun}.log on {env}.",
    "The relevant function is {func}().",
    "{person2} thinks {reason}, but we have no numbers yet.",
    "We first suspected {cause}, which turned out to be wrong.",
    "Numbers from the load test: {n} requests per second with {n2} workers.",
    "Same thing happened in {project2} last spring.",
    "Rolled out behind the {feature} flag first.",
    "If it comes back, check {path} and the {service} dashboards.",
)


def extra_sentences(rng: random.Random) -> int:
    """How many detail sentences follow the main one: mostly 0-2, some long memories."""
    roll = rng.random()
    if roll < 0.30:
        return 0
    if roll < 0.60:
        return 1
    if roll < 0.80:
        return 2
    if roll < 0.90:
        return 3
    if roll < 0.97:
        return rng.randint(4, 6)
    return rng.randint(8, 14)


def memory_record(rng: random.Random, index: int, now: datetime) -> dict[str, Any]:
    """One memory as a JSONL import object."""
    gen = Gen(rng)
    kind = rng.choices(KIND_NAMES, KIND_WEIGHTS)[0]
    sentences = [gen.fill(rng.choice(KINDS[kind][1]))]
    sentences += [gen.fill(rng.choice(DETAILS)) for _ in range(extra_sentences(rng))]
    text = " ".join(sentences)
    tags = [kind]
    tags += rng.sample(TAGS, rng.randint(0, 3))
    tool_tags = [name for name, _ in TOOLS if name in text]
    if tool_tags:
        tags.append(rng.choice(tool_tags))
    namespace = rng.choice(NAMESPACES)
    record: dict[str, Any] = {
        "text": text,
        "tags": tags,
        "namespace": namespace,
        "importance": round(rng.uniform(0.1, 1.0), 2),
        "created_at": (now - timedelta(seconds=rng.uniform(0, 365 * 86400))).isoformat(timespec="seconds"),
        "metadata": {"kind": kind, "source": rng.choice(("chat", "cli", "hook", "import"))},
    }
    if namespace != "personal" or rng.random() < 0.2:
        record["project"] = gen.project
    if rng.random() < 0.4:
        record["session"] = f"sess-{rng.randrange(5000):04d}"
        record["role"] = rng.choice(("user", "assistant"))
    if kind == "preference" and rng.random() < 0.3:
        record["key"] = f"pref-{index}"
    if rng.random() < 0.03:
        record["pinned"] = True
    return record


def corpus(count: int, seed: int, now: datetime) -> list[dict[str, Any]]:
    """The first `count` memories of the corpus of `seed` (a prefix of any larger one)."""
    rng = random.Random(seed)
    return [memory_record(rng, index, now) for index in range(count)]


QUERY_TEMPLATES = (
    "why did we switch from {tool2} to {tool} for {purpose}",
    "how did we fix the {error} in {project}",
    "what does {person} prefer for {pref_area}",
    "user preferences about {pref_area}",
    "when is the next meeting about {topic}",
    "which {tool} version runs on {env}",
    "where is the config for the {service}",
    "what was decided about {feature}",
    "who is blocked on {project} tickets",
    "how do I rebuild {project} locally",
    "what did {person} say about {topic}",
    "root cause of {symptom}",
    "why are there {symptom}",
    "{feature} bug in {project}",
    "who owns the {service}",
    "what timezone is {person} in",
    "what should I remember about {project} deploys",
    "known issues with {tool} {version}",
    "todo items for the {feature} release",
    "retry logic for the {service}",
)
_FILLER_WORDS = """
    that this with from when then than have were which there about after before only into also does what
    will would could should they them their been being over under because
"""
FILLER = frozenset(_FILLER_WORDS.split())
IDENTIFIER = re.compile(
    r"[A-Z]{2,5}-\d+|\b[a-f0-9]{7}\b|[\w./-]+/[\w.-]+\.\w+|\b[a-z]+_[a-z_]+\b|\b[a-z]+[A-Z]\w+\b|"
    r"\b[A-Z][A-Za-z]+Error\b|\bE[A-Z]{4,}\b|\b\d+\.\d+(?:\.\d+)?\b"
)


def queries(count: int, seed: int, memories: Sequence[dict[str, Any]]) -> list[str]:
    """Distinct queries: about 60% natural language, 40% with an exact identifier from the corpus."""
    rng = random.Random(seed * 7919 + 17)
    gen = Gen(rng)
    out: dict[str, None] = {}
    while len(out) < count:
        gen.project = rng.choice(PROJECTS)
        if rng.random() < 0.6:
            template = rng.choice(QUERY_TEMPLATES).replace("{pref_area}", rng.choice(PREF_AREAS))
            # An error in a question is short, as people type it: a code, not a whole message.
            query = gen.fill(template.replace("{error}", rng.choice(ERROR_CODES)))
        else:
            text = rng.choice(memories)["text"]
            found = IDENTIFIER.findall(text)
            if not found:
                continue
            token = rng.choice(found)
            words = [w for w in re.findall(r"[a-z]{4,}", text) if w not in token and w not in FILLER]
            context = rng.sample(words, min(len(words), rng.randint(0, 2)))
            query = " ".join([token, *context]) if rng.random() < 0.5 else " ".join([*context, token])
        out.setdefault(query.strip(), None)
    return list(out)


def write_jsonl(path: Path, records: Sequence[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    tmp.replace(path)


# -- measuring --------------------------------------------------------------------------------


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class Figure:
    name: str
    unit: str  # "s", "ms" or "mem/s"
    values: list[float]
    target: float | None = None  # None: information only
    higher_is_better: bool = False
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def passed(self) -> bool | None:
        if self.target is None:
            return None
        return self.median >= self.target if self.higher_is_better else self.median <= self.target

    def tag(self, background: float | None) -> Figure:
        self.extra["background_cores"] = None if background is None else round(background, 2)
        return self

    def to_dict(self) -> dict[str, Any]:
        values = sorted(self.values)
        return {
            "name": self.name,
            "unit": self.unit,
            "runs": len(values),
            "median": self.median,
            "min": values[0],
            "max": values[-1],
            "p90": values[min(len(values) - 1, int(0.9 * len(values)))],
            "target": self.target,
            "target_op": ">=" if self.higher_is_better else "<=",
            "pass": self.passed,
            "note": self.note,
            **self.extra,
        }


def run_process(argv: Sequence[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    """Run a command to its end; (wall seconds, result). The child's CPU seconds go to CPU_SECONDS."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU_SECONDS.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])} … exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    return elapsed, done


CPU_SECONDS: list[float] = []


def cpu_of_last(runs: int) -> dict[str, float]:
    """The median CPU seconds (user + system) of the last `runs` processes."""
    return {"cpu_s_median": statistics.median(CPU_SECONDS[-runs:])} if runs and CPU_SECONDS else {}


def _busy_seconds() -> float | None:
    """CPU seconds the whole machine has spent busy since boot (Linux), or None."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    """CPU seconds of this process and of its waited-for children."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


class Background:
    """Measures how many CPUs other processes kept busy, on average, between start and stop."""

    def __init__(self) -> None:
        self.cores: float | None = None
        self._start = (_busy_seconds(), _own_seconds(), time.monotonic())

    def stop(self) -> float | None:
        busy0, own0, t0 = self._start
        busy1, own1, t1 = _busy_seconds(), _own_seconds(), time.monotonic()
        if busy0 is None or busy1 is None or t1 <= t0:
            return None
        self.cores = max(0.0, ((busy1 - busy0) - (own1 - own0)) / (t1 - t0))
        return self.cores


def settle(wait: float, threshold: float = BUSY) -> None:
    """Wait up to `wait` seconds for other processes to leave the CPUs (nearly) idle."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        meter = Background()
        time.sleep(1)
        load = meter.stop()
        if load is None or load <= threshold:
            return
        log(f"  other processes keep {load:.2f} CPUs busy; waiting for the machine to quieten")
        time.sleep(3)


PHASES_SCRIPT = """
import json, sys, time
t, c = [time.perf_counter()], [time.process_time()]
def mark():
    t.append(time.perf_counter())
    c.append(time.process_time())
import memsearch.cli.app  # typer: what every command imports
mark()
from memsearch.api import Memsearch
from memsearch.retrieval.pipeline import SearchRequest  # the pipeline, the store's protocol
mark()
import numpy
mark()
import onnxruntime, tokenizers
mark()
from memsearch.embedding import load_encoder, resolve_model
load_encoder(resolve_model())
mark()
ms = Memsearch(sys.argv[1])
ms.store()
mark()
ms.store().vector_index()
mark()
outcome = ms.search(SearchRequest(sys.argv[2], k=10, mode="hybrid"))
mark()
text = json.dumps(outcome.to_dict(), ensure_ascii=False, indent=2)
mark()
print(json.dumps([[b - a for a, b in zip(t, t[1:])], [b - a for a, b in zip(c, c[1:])]]))
"""
PHASES = (
    "import memsearch.cli.app (typer)",
    "import api + pipeline",
    "import numpy",
    "import onnxruntime + tokenizers",
    "load encoder (tokenizer, ONNX session)",
    "open store (its modules imported)",
    "read vector matrix (cache mapped, digest checked)",
    "one hybrid search (embed + legs + fuse)",
    "render JSON",
)


def bench_phases(store: Path, qs: Sequence[str], env: dict[str, str], label: str) -> list[Figure]:
    """Where a search process spends its time: the CLI's steps, timed inside fresh processes (wall
    time, and the process's CPU time in each figure's extra: on a loaded machine the wall time of a
    step also holds the time the process waited for a CPU)."""
    runs: list[list[float]] = []
    cpus: list[list[float]] = []
    walls = []
    for query in qs:
        wall, done = run_process([sys.executable, "-c", PHASES_SCRIPT, str(store), query], env)
        phase_walls, phase_cpus = json.loads(done.stdout.decode().strip().splitlines()[-1])
        runs.append(phase_walls)
        cpus.append(phase_cpus)
        walls.append(wall)
    figures = [
        Figure(
            f"  phase: {name} ({label})",
            "ms",
            [run[i] * 1000 for run in runs],
            extra={"cpu_ms_median": statistics.median(cpu[i] * 1000 for cpu in cpus)},
        )
        for i, name in enumerate(PHASES)
    ]
    figures.append(
        Figure(
            f"  phase: interpreter start + exit ({label})",
            "ms",
            [(wall - sum(run)) * 1000 for wall, run in zip(walls, runs, strict=True)],
            note="wall time of the phases process minus its timed phases (it exits with the interpreter teardown)",
        )
    )
    return figures


class Precomputed:
    """An Encoder that looks up vectors computed beforehand by text; other texts it embeds."""

    def __init__(self, encoder: Any, texts: Sequence[str], vectors: np.ndarray) -> None:
        self.info = encoder.info
        self._encoder = encoder
        self._row = {text: row for row, text in enumerate(texts)}
        self._vectors = vectors

    def encode(self, texts: Sequence[str], *, progress: Any = None) -> np.ndarray:
        out = np.zeros((len(texts), self.info.dim), dtype=np.float32)
        missing = []
        for n, text in enumerate(texts):
            row = self._row.get(text)
            if row is None:
                missing.append(n)
            else:
                out[n] = self._vectors[row]
        if missing:
            out[missing] = self._encoder.encode([texts[n] for n in missing])
        return out


def embeddings(texts: Sequence[str], folder: Path, encoder: Any) -> np.ndarray:
    """Vectors of `texts`, computed in chunks saved under `folder` so a stopped run resumes."""
    folder.mkdir(parents=True, exist_ok=True)
    parts = []
    started = time.perf_counter()
    computed = 0
    for number, start in enumerate(range(0, len(texts), EMBED_CHUNK)):
        chunk = texts[start : start + EMBED_CHUNK]
        file = folder / f"chunk-{number:04d}.npy"
        if file.is_file():
            vectors = np.load(file)
            if len(vectors) == len(chunk):
                parts.append(vectors)
                continue
            if len(vectors) > len(chunk):  # a larger corpus saved a full chunk: its prefix is ours
                parts.append(vectors[: len(chunk)])
                continue
        vectors = encoder.encode(list(chunk))
        if len(chunk) == EMBED_CHUNK:
            np.save(file.with_suffix(".tmp.npy"), vectors)
            file.with_suffix(".tmp.npy").replace(file)
        parts.append(vectors)
        computed += len(chunk)
        rate = computed / (time.perf_counter() - started)
        left = (len(texts) - start - len(chunk)) / rate
        log(f"  embedded {start + len(chunk)}/{len(texts)} ({rate:.0f} texts/s, ~{left / 60:.1f} min left)")
    return np.concatenate(parts) if parts else np.zeros((0, encoder.info.dim), np.float32)


def corpus_embeddings(texts: Sequence[str], seed: int, out: Path, encoder: Any) -> np.ndarray:
    """The vectors of the seed's corpus texts (a prefix of it), cached under `out` by generator,
    seed and model: those of the stores build_store builds (bench/peers.py gives them to the peers)."""
    model = re.sub(r"[^\w.-]+", "_", encoder.info.name.rsplit("/", 1)[-1])
    return embeddings(texts, out / f"embeddings-g{GENERATOR_VERSION}-s{seed}-{model}", encoder)


def schema_key() -> str:
    """Changes whenever memsearch's migrations do, so a cached store always has the current schema."""
    try:
        from memsearch.store.migrations import MIGRATIONS
    except ImportError:
        return "unknown"
    return hashlib.sha256("\0".join(MIGRATIONS).encode()).hexdigest()[:10]


def build_store(size: int, seed: int, out: Path, now: datetime) -> tuple[Path, float | None]:
    """The cached store of `size` memories of the seed's corpus; built when missing.

    The store is keyed by size, seed, generator version and schema; the embeddings, the slow
    part, are cached apart (keyed by generator, seed and model), so a schema change costs only
    the inserts.
    """
    from memsearch.api import Memsearch
    from memsearch.embedding import load_encoder, resolve_model
    from memsearch.models import NewMemory

    folder = out / "stores"
    path = folder / f"store-g{GENERATOR_VERSION}-s{seed}-n{size}-{schema_key()}.db"
    if path.is_file():
        return path, None
    for stale in folder.glob(f"store-g*-s{seed}-n{size}[-.]*"):  # other schemas or generators
        if stale.is_dir() and not stale.is_symlink():  # a store's vector cache folder (STORE.vectors)
            shutil.rmtree(stale)
        else:
            stale.unlink()
    log(f"building the {size}-memory store {path} (cached for later runs)")
    started = time.perf_counter()
    records = corpus(size, seed, now)
    texts = [r["text"] for r in records]
    encoder = load_encoder(resolve_model())
    vectors = corpus_embeddings(texts, seed, out, encoder)
    staging = path.with_suffix(".building.db")
    for leftover in (staging, Path(f"{staging}-wal"), Path(f"{staging}-shm")):
        leftover.unlink(missing_ok=True)
    with Memsearch(staging, encoder=Precomputed(encoder, texts, vectors)) as ms:
        for start in range(0, size, 5000):
            ms.add_many([NewMemory.from_json(r) for r in records[start : start + 5000]])
            log(f"  stored {min(start + 5000, size)}/{size}")
        if ms.stats()["memories"] != size:
            raise RuntimeError(f"the built store holds {ms.stats()['memories']} memories, not {size}")
        # The vectors must be those of the texts: check a sample against the encoder itself.
        index = ms.store().vector_index()
        rows = random.Random(seed).sample(range(index.ids.size), min(20, index.ids.size))
        sample = ms.store().get_many([int(index.ids[row]) for row in rows])
        fresh = encoder.encode([sample[int(index.ids[row])].text for row in rows])
        if float(np.min(np.sum(index.matrix[rows] * fresh, axis=1))) < 0.999:
            raise RuntimeError("stored vectors do not match their texts; the store was not built right")
    staging.replace(path)
    elapsed = time.perf_counter() - started
    log(f"built {path.name} in {elapsed:.0f} s")
    return path, elapsed


def bench_cli_search(exe: str, store: Path, qs: Sequence[str], env: dict[str, str], label: str) -> Figure:
    argv = [exe, "search", "--mode", "hybrid", "", "--db", str(store), "--format", "json"]
    argv[4] = "warm-up query about the deploy"
    run_process(argv, env)  # untimed: the very first run may export the ONNX model into the cache
    times = []
    for query in qs:
        argv[4] = query
        elapsed, done = run_process(argv, env)
        document = json.loads(done.stdout)
        if document["strategy"] != "hybrid" or not document["results"]:
            raise RuntimeError(f"unexpected search output for {query!r}: {done.stdout[:300]!r}")
        times.append(elapsed)
    return Figure(
        f"CLI search --mode hybrid, {label} (process)", "s", times, 0.30, note="fresh process, wall time, JSON out"
    )


NUMPY_FLOOR = "python -c 'import numpy' (process, the floor)"
# Issue 32's goals for a fresh shell, as multiples of the floor (CPU time, and wall time beside it).
FLOOR_TARGETS = {"lexical": 1.2, "hybrid": 1.5, "autoserve": 1.0}
AUTOSERVE_IDLE_S = 600


def bench_startup(
    exe: str, store: Path, qs: Sequence[str], env: dict[str, str], label: str, baseline: Path | None = None
) -> list[Figure]:
    """Issue 32's fresh-shell figures beside their floor, `python -c "import numpy"`, taken in turns
    with them (each round runs every command once, in an order rotated round by round, so a burst
    of load lands on all alike): a lexical search, a hybrid search in this process (the ONNX model
    started), and a hybrid search through the `memsearch serve` that autoserve started (the first
    command of the run starts it: MEMSEARCH_AUTOSERVE; the later ones talk HTTP to it). Wall and
    CPU (user + system of the process) medians; the ratios are in each figure's extra. With
    `baseline` (a folder holding another memsearch package) the same searches run by that code, on
    PYTHONPATH, take their turns too: a before/after under one load."""
    base = [exe, "search", "", "--db", str(store), "--format", "json"]
    commands: dict[str, tuple[list[str], dict[str, str]]] = {"floor": ([sys.executable, "-c", "import numpy"], env)}
    variants = [("", env)]
    if baseline is not None:
        variants.append((" [baseline]", {**env, "PYTHONPATH": str(baseline.resolve())}))
    auto_env = {**env, "MEMSEARCH_AUTOSERVE": str(AUTOSERVE_IDLE_S)}
    for tag, variant_env in variants:
        commands["lexical" + tag] = ([*base, "--mode", "lexical", "--no-server"], variant_env)
        commands["hybrid" + tag] = ([*base, "--mode", "hybrid", "--no-server"], variant_env)
        # The baseline's client talks to the same server (the first command of the run started it).
        commands["autoserve" + tag] = ([*base, "--mode", "hybrid"], {**variant_env, **auto_env})
    walls: dict[str, list[float]] = {name: [] for name in commands}
    cpus: dict[str, list[float]] = {name: [] for name in commands}
    discovery = store.with_name(store.name + ".server.json")
    stop_server(discovery)
    first_argv, first_env = commands["autoserve"]
    first_argv[2] = "warm-up query about the deploy"
    first_wall, _ = run_process(first_argv, first_env)  # no server yet: searches in-process, starts one
    first_cpu = CPU_SECONDS[-1]
    try:
        deadline = time.monotonic() + 60
        while not discovery.exists():
            if time.monotonic() > deadline:
                raise RuntimeError("autoserve started no server of the store within 60 s")
            time.sleep(0.05)
        for name, (argv, command_env) in commands.items():  # untimed: page cache, bytecode, the server's model
            if name != "floor":
                argv[2] = "warm-up query about the deploy"
            run_process(argv, command_env)
        names = list(commands)
        for round_, query in enumerate(qs):
            shift = round_ % len(names)
            for name in names[shift:] + names[:shift]:
                argv, command_env = commands[name]
                if name != "floor":
                    argv[2] = query
                elapsed, done = run_process(argv, command_env)
                if name != "floor":
                    document = json.loads(done.stdout)
                    if document["strategy"] != ("lexical" if name.startswith("lexical") else "hybrid"):
                        raise RuntimeError(f"unexpected {name} search output: {done.stdout[:300]!r}")
                walls[name].append(elapsed)
                cpus[name].append(CPU_SECONDS[-1])
    finally:
        stop_server(discovery)
    titles = {
        "lexical": f"CLI search --mode lexical, {label} (process)",
        "hybrid": f"CLI search --mode hybrid in-process, {label} (process)",
        "autoserve": f"CLI search through the autoserved `memsearch serve`, {label} (process)",
    }
    notes = {
        "lexical": "fresh process, JSON out, --no-server",
        "hybrid": "fresh process, JSON out, --no-server: the ONNX model started in the process",
        "autoserve": f"MEMSEARCH_AUTOSERVE={AUTOSERVE_IDLE_S}, --mode hybrid: the run's first command started the "
        f"server ({first_wall:.3f} s wall, {first_cpu:.3f} s CPU, searching in-process); the CLI talks HTTP",
    }
    floor_cpu = statistics.median(cpus["floor"])
    figures = [
        Figure(
            NUMPY_FLOOR,
            "s",
            walls["floor"],
            note="numpy's import: the floor of a process that searches vectors",
            extra={"cpu_s_median": floor_cpu},
        )
    ]
    for name in commands:
        if name == "floor":
            continue
        kind, _, tag = name.partition(" ")
        cpu = statistics.median(cpus[name])
        figures.append(
            Figure(
                titles[kind] + (f" {tag}" if tag else ""),
                "s",
                walls[name],
                note=notes[kind],
                extra={
                    "cpu_s_median": cpu,
                    "cpu_numpy_floor_ratio": cpu / floor_cpu,
                    "numpy_floor_ratio_target": FLOOR_TARGETS[kind],
                },
            )
        )
    return figures


def stop_server(discovery: Path) -> None:
    """Stop the `memsearch serve` its discovery file names (one autoserve started), if any."""
    try:
        pid = int(json.loads(discovery.read_text(encoding="utf-8"))["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while discovery.exists() and time.monotonic() < deadline:  # it withdraws the file as it exits
        time.sleep(0.05)


@contextmanager
def served(exe: str, store: Path, env: dict[str, str]) -> Iterator[None]:
    """`memsearch serve` on the store (port 0) while the block runs; the CLI finds it through the
    discovery file beside the store."""
    discovery = store.with_name(store.name + ".server.json")
    discovery.unlink(missing_ok=True)
    server = subprocess.Popen(
        [exe, "serve", "--db", str(store), "--port", "0"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        while not discovery.exists():
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"memsearch serve did not start: {server.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
            time.sleep(0.05)
        yield
    finally:
        server.terminate()
        server.wait(timeout=60)


def floor_ratios(figures: Sequence[Figure]) -> None:
    """Each process figure (seconds) as a multiple of the numpy floor, in its extra."""
    floor = next((fig.median for fig in figures if fig.name == NUMPY_FLOOR), None)
    for fig in figures:
        if floor and fig.unit == "s" and "(process)" in fig.name:
            fig.extra["numpy_floor_ratio"] = fig.median / floor


def hybrid_search_times(ms: Any, qs: Sequence[str]) -> tuple[list[float], Any]:
    """Milliseconds of each query's hybrid search (k=10) through the library, and the last
    search's outcome; a query without results is an error (the store is not what was built)."""
    from memsearch.retrieval.pipeline import SearchRequest

    times = []
    outcome = None
    for query in qs:
        started = time.perf_counter()
        outcome = ms.search(SearchRequest(query, k=10, mode="hybrid"))
        times.append((time.perf_counter() - started) * 1000)
        if not outcome.results:
            raise RuntimeError(f"no results for {query!r}")
    return times, outcome


def bench_api_search(store: Path, qs: Sequence[str], label: str, target: float) -> list[Figure]:
    from memsearch.api import Memsearch
    from memsearch.retrieval.pipeline import SearchRequest

    embed_times = []
    with Memsearch(store) as ms:
        started = time.perf_counter()
        ms.search(SearchRequest("warm-up: where is the deploy config", k=10, mode="hybrid"))
        first = time.perf_counter() - started
        encoder = ms.encoder()
        times, _ = hybrid_search_times(ms, qs)
        for query in qs:
            started = time.perf_counter()
            encoder.encode([query])
            embed_times.append((time.perf_counter() - started) * 1000)
        lexical_times = []
        for query in qs:
            started = time.perf_counter()
            ms.search(SearchRequest(query, k=10, mode="lexical"))
            lexical_times.append((time.perf_counter() - started) * 1000)
    return [
        Figure(
            f"API search hybrid k=10, {label} (per query)",
            "ms",
            times,
            target,
            note=f"{len(qs)} distinct queries after a warm-up",
            extra={"first_search_ms": first * 1000},
        ),
        Figure(f"  of which: query embedding ({label})", "ms", embed_times, note="encoder.encode([q]) alone"),
        Figure(f"  lexical-only search ({label})", "ms", lexical_times, note="mode=lexical, same queries"),
        Figure(
            f"  first search in a process ({label})",
            "ms",
            [first * 1000],
            note="reads the vector matrix (and loads the encoder if not loaded yet)",
        ),
    ]


def bench_import(
    exe: str, n: int, seed: int, runs: int, out: Path, env: dict[str, str], now: datetime
) -> tuple[Figure, Figure, Figure]:
    from memsearch.api import Memsearch
    from memsearch.embedding import load_encoder, resolve_model
    from memsearch.models import NewMemory

    source = out / f"import-g{GENERATOR_VERSION}-s{seed}-n{n}.jsonl"
    write_jsonl(source, corpus(n, seed + 1_000_003, now))  # not the stores' corpus
    scratch = out / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)

    def fresh(name: str) -> Path:
        db = scratch / name
        for file in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
            file.unlink(missing_ok=True)
        return db

    cli_times: list[float] = []
    cli_cpu: list[float] = []
    for run in range(runs):
        db = fresh("import-cli.db")
        elapsed, _ = run_process([exe, "import", str(source), "--db", str(db)], env)
        cli_times.append(elapsed)
        cli_cpu.append(CPU_SECONDS[-1])
        log(f"  CLI import run {run + 1}/{runs}: {elapsed:.2f} s ({n / elapsed:.0f} memories/s)")
    fresh("import-cli.db")

    # The two routes take turns, each turn next to a floor run, so both meet the same load.
    encoders = {backend: load_encoder(resolve_model(), backend) for backend in ("onnx", "onnx-int8")}
    times: dict[str, list[float]] = {backend: [] for backend in encoders}
    floors = []
    for run in range(runs):
        floors.append(compute_floor())
        for backend, encoder in encoders.items():
            encoder.encode(["warm-up"])  # the API figures are with a loaded model
            db = fresh("import-api.db")
            started = time.perf_counter()
            lines = source.read_text(encoding="utf-8").splitlines()
            memories = [NewMemory.from_json(json.loads(line)) for line in lines]
            with Memsearch(db, encoder=encoder) as ms:
                ids = ms.add_many(memories)
            elapsed = time.perf_counter() - started
            assert len(ids) == n
            times[backend].append(elapsed)
            log(f"  API import ({backend}) run {run + 1}/{runs}: {elapsed:.2f} s ({n / elapsed:.0f} memories/s)")
    fresh("import-api.db")
    api_times, int8_times = times["onnx"], times["onnx-int8"]
    words = [len(json.loads(line)["text"].split()) for line in source.read_text(encoding="utf-8").splitlines()]
    extra = {"memories": n, "seconds": statistics.median(cli_times), "mean_words": statistics.mean(words)}
    return (
        Figure(
            f"CLI import {n} memories (process)",
            "mem/s",
            [n / t for t in cli_times],
            150.0,
            higher_is_better=True,
            note="wall time incl. process start + model load",
            extra={**extra, "cpu_s_median": statistics.median(cli_cpu)},
        ),
        Figure(
            f"API add_many {n} memories",
            "mem/s",
            [n / t for t in api_times],
            150.0,
            higher_is_better=True,
            note="model already loaded; parse+embed+insert",
            extra={**extra, "seconds": statistics.median(api_times), **floor_ratio(n, api_times, floors)},
        ),
        Figure(
            f"API add_many {n} memories, MEMSEARCH_ENCODER=onnx-int8",
            "mem/s",
            [n / t for t in int8_times],
            higher_is_better=True,
            note="opt-in int8 weights; as above",
            extra={**extra, "seconds": statistics.median(int8_times), **floor_ratio(n, int8_times, floors)},
        ),
    )


def default_locomo() -> Path | None:
    """shared/benchdata/locomo_dev.json beside the checkout (or a worktree of it), if there."""
    for parent in HERE.parents:
        candidate = parent / "shared" / "benchdata" / "locomo_dev.json"
        if candidate.is_file():
            return candidate
    return None


def bench_conversation_import(locomo: Path, runs: int, out: Path) -> Figure:
    """`Memsearch.import_text(..., fmt="locomo")` of LoCoMo's first dev conversation into an empty
    store, model loaded: its session chunks and turns, with the turns' context and next views."""
    from memsearch.api import Memsearch
    from memsearch.embedding import load_encoder, resolve_model
    from memsearch.ingest.conversations import conversation_memories
    from memsearch.ingest.readers import read_locomo
    from memsearch.models import VECTOR_VIEWS

    conversation = json.loads(locomo.read_text(encoding="utf-8"))[:1]
    content = json.dumps(conversation)
    memories = [m for c in read_locomo(content, locomo.name) for m in conversation_memories(c)]
    texts = [m.text for m in memories] + [t for m in memories for v, t in m.views.items() if v in VECTOR_VIEWS]
    db = out / "scratch" / "import-locomo.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    encoder = load_encoder(resolve_model(), "onnx")
    encoder.encode(["warm-up"])
    times, cpu, floors = [], [], []
    for run in range(runs):
        floors.append(compute_floor())
        for file in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
            file.unlink(missing_ok=True)
        started, cpu_started = time.perf_counter(), time.process_time()
        with Memsearch(db, encoder=encoder) as ms:
            outcome = ms.import_text(content, source=locomo.name, fmt="locomo")
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - cpu_started)
        assert sum(outcome.counts.values()) == len(memories)
        log(f"  LoCoMo import run {run + 1}/{runs}: {times[-1]:.2f} s ({len(memories) / times[-1]:.0f} memories/s)")
    for file in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        file.unlink(missing_ok=True)
    return Figure(
        f"API import of a LoCoMo conversation ({conversation[0]['sample_id']}, {len(memories)} memories)",
        "mem/s",
        [len(memories) / t for t in times],
        higher_is_better=True,
        note="turns + session chunks, their views embedded too; model already loaded",
        extra={
            "memories": len(memories),
            "distinct_texts": len(set(texts)),
            "seconds": statistics.median(times),
            "cpu_s_median": statistics.median(cpu),
            **floor_ratio(len(memories), times, floors),
        },
    )


# -- scale: a generated store of a million memories (--million) -----------------------------------


def clustered_vectors(n: int, dim: int, seed: int) -> np.ndarray:
    """Unit vectors around 1,000 fixed centres (as bench_postgres.py's scale run): neighbourhoods
    like those of real embeddings. Data and queries share the centres; `seed` draws the points."""
    centres = np.random.default_rng(7).normal(size=(1000, dim)).astype(np.float32)
    rng = np.random.default_rng(seed)
    out = np.empty((n, dim), np.float32)
    for start in range(0, n, 100_000):  # in slices: a million rows of noise at once is 3 GB
        count = min(100_000, n - start)
        rows = centres[rng.integers(0, 1000, count)] + 0.6 * rng.normal(size=(count, dim)).astype(np.float32)
        out[start : start + count] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return out


def build_generated_store(size: int, seed: int, out: Path, now: datetime) -> tuple[Path, float | None]:
    """The cached store of `size` memories with generated vectors: the texts are the 10k corpus's,
    repeated with a serial number (the corpus generator is too slow for a million); every tenth
    memory is in project `tenth` (a scope the vector legs search through the index too)."""
    from memsearch.embedding import load_encoder, resolve_model
    from memsearch.models import NewMemory
    from memsearch.store.sqlite import SQLiteStore

    folder = out / "stores"
    path = folder / f"generated-g{GENERATOR_VERSION}-s{seed}-n{size}-{schema_key()}.db"
    if path.is_file():
        return path, None
    folder.mkdir(parents=True, exist_ok=True)
    log(f"building the generated {size}-memory store {path} (cached for later runs)")
    started = time.perf_counter()
    base = corpus(10_000, seed, now)
    model = load_encoder(resolve_model()).info
    vectors = clustered_vectors(size, model.dim, seed=17)
    staging = path.with_suffix(".building.db")
    for leftover in (staging, Path(f"{staging}-wal"), Path(f"{staging}-shm")):
        leftover.unlink(missing_ok=True)
    store = SQLiteStore.open(staging, create=True)
    batch = 20_000
    for start in range(0, size, batch):
        memories = []
        for i in range(start, min(size, start + batch)):
            record = dict(base[i % len(base)])
            record["text"] = f"{record['text']} (#{i})"
            if record.get("key"):
                record["key"] = f"{record['key']}-{i}"
            record["project"] = "tenth" if i % 10 == 0 else record.get("project") or "common"
            memories.append(NewMemory.from_json(record))
        store.insert(memories, vectors[start : start + len(memories)], model, now)
        log(f"  stored {min(start + batch, size)}/{size}")
    store.close()
    staging.replace(path)
    for suffix in ("-wal", "-shm"):
        Path(f"{staging}{suffix}").unlink(missing_ok=True)
    elapsed = time.perf_counter() - started
    log(f"built {path.name} in {elapsed:.0f} s")
    return path, elapsed


# VmHWM, not ru_maxrss: Linux carries ru_maxrss over an exec, so a child of this (large) process
# would report the parent's size.
PEAK_SCRIPT = """
import sys
from memsearch.api import Memsearch
from memsearch.retrieval.pipeline import SearchRequest
def peak():
    return int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) * 1024
with Memsearch(sys.argv[1]) as ms:
    ms.encoder().encode(["warm-up"])
    before = peak()
    ms.search(SearchRequest(sys.argv[2], k=10, mode="hybrid"))
print(before, peak())
"""


def bench_peak_memory(store: Path, qs: Sequence[str], env: dict[str, str], label: str, matrix_bytes: int) -> Figure:
    """Peak resident memory of a fresh search process, and how much of it the search added to a
    process with the encoder loaded: each against the bytes of the vector matrix."""
    peaks, added = [], []
    for query in qs:
        _, done = run_process([sys.executable, "-c", PEAK_SCRIPT, str(store), query], env)
        before, peak = (int(x) for x in done.stdout.decode().split()[-2:])
        peaks.append(peak / 2**20)
        added.append((peak - before) / 2**20)
    matrix = matrix_bytes / 2**20
    return Figure(
        f"  peak memory of a search process ({label})",
        "MB",
        peaks,
        note=f"max RSS; the search itself added a median {statistics.median(added):.0f} MB to a process with the "
        f"encoder loaded; vector matrix {matrix:.0f} MB (target: peak ≤ 2× matrix = {2 * matrix:.0f} MB)",
        extra={"added_mb_median": statistics.median(added), "matrix_mb": matrix},
    )


def bench_million(
    size: int, seed: int, out: Path, qs: Sequence[str], env: dict[str, str], now: datetime
) -> list[Figure]:
    """In-process hybrid search on a generated store of `size` memories (the vector legs through
    the approximate index above its threshold), recall@10 of the vector search against exact
    search, the cache and index build times and sizes, and a search process's peak memory."""
    from memsearch.api import Memsearch
    from memsearch.retrieval.pipeline import SearchRequest
    from memsearch.store import Scope
    from memsearch.store.sqlite import SQLiteStore
    from memsearch.store.vector_cache import cache_folder
    from memsearch.store.vectors import vector_top

    path, built = build_generated_store(size, seed, out, now)
    name = label(size)
    figures = [] if built is None else [Figure(f"store build, {name} generated memories (one-off)", "s", [built])]
    cache = cache_folder(path)
    builds_file = path.with_name(path.name + ".builds.json")
    store = SQLiteStore.open(path)
    started = time.perf_counter()
    index = store.vector_index()
    cache_seconds = time.perf_counter() - started
    probe = clustered_vectors(1, index.matrix.shape[1], seed=3)[0]
    started = time.perf_counter()
    engine = store.vector_search(probe, Scope(), 10).engine
    index_seconds = time.perf_counter() - started
    if not builds_file.is_file():  # the first run on this store wrote the cache: keep its figures for later runs
        builds_file.write_text(json.dumps({"cache_s": cache_seconds, "index_s": index_seconds}), encoding="utf-8")
    builds = json.loads(builds_file.read_text(encoding="utf-8")) if builds_file.is_file() else {}
    sizes = {suffix: sum(f.stat().st_size for f in cache.glob(f"*{suffix}")) for suffix in (".f32.npy", ".hnsw")}
    figures += [
        Figure(
            f"  vector cache written, {name} (one-off per store generation)",
            "s",
            [builds.get("cache_s", cache_seconds)],
            note=f"the matrix out of SQLite into {sizes['.f32.npy'] / 2**20:.0f} MB of .npy beside the store",
        ),
    ]
    if engine == "index":
        figures.append(
            Figure(
                f"  approximate index build, {name} (one-off; later writes update it)",
                "s",
                [builds.get("index_s", index_seconds)],
                note=f"usearch HNSW, f16, M=16: {sizes['.hnsw'] / 2**20:.0f} MB",
            )
        )
    # Recall@10 of the vector search against exact search, over everything and a tenth of it.
    queries_v = clustered_vectors(200, index.matrix.shape[1], seed=9)
    tenth = Scope(project="tenth")
    for scope, what in ((Scope(), "all"), (tenth, "a 10% scope")):
        mask = store._scope_mask(index, scope)
        recalls, latencies = [], []
        for query in queries_v:
            tick = time.perf_counter()
            hits = store.vector_search(query, scope, 10)
            latencies.append((time.perf_counter() - tick) * 1000)
            truth = {i for i, _ in vector_top(index, query, 10, mask)}  # after: it keeps the query's scores
            recalls.append(len(truth & {i for i, _ in hits}) / 10)
        figures.append(
            Figure(
                f"  vector search k=10, {what}, {name} ({hits.engine})",
                "ms",
                latencies,
                note=f"recall@10 against exact search {statistics.mean(recalls):.4f} over {len(recalls)} "
                "generated queries (target ≥ 0.95)",
                extra={"recall_at_10": statistics.mean(recalls)},
            )
        )
    matrix_bytes = int(index.matrix.nbytes)
    store.close()
    with Memsearch(path) as ms:
        ms.search(SearchRequest("warm-up: where is the deploy config", k=10, mode="hybrid"))
        times, outcome = hybrid_search_times(ms, qs)
    ordered = sorted(times)
    figures.insert(
        0,
        Figure(
            f"API search hybrid k=10, {name} generated (per query)",
            "ms",
            times,
            40.0 if size >= 1_000_000 else None,
            note=f"p95 {ordered[int(0.95 * (len(ordered) - 1))]:.1f} ms; {len(qs)} distinct queries; vector legs: "
            + ", ".join(f"{leg} {engine}" for leg, engine in outcome.vector_engines.items()),
        ),
    )
    figures.append(bench_peak_memory(path, qs[:5], env, name, matrix_bytes))
    return figures


def compute_floor() -> float:
    """Seconds for a fixed single-threaded Python loop: on a shared machine, a rate times this
    floor (memories per floor) moves far less with the load than the rate itself. (A numpy
    matrix product loop swung 4x between runs: its BLAS threads fight the other processes.)"""
    started = time.perf_counter()
    total = 0
    for i in range(3_000_000):
        total += i * i
    return time.perf_counter() - started


def floor_ratio(n: int, times: Sequence[float], floors: Sequence[float]) -> dict[str, float]:
    floor = statistics.median(floors)
    return {"floor_s": floor, "memories_per_floor": n / statistics.median(times) * floor}


# -- output -----------------------------------------------------------------------------------


def fmt_value(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value:.3f} s"
    if unit == "ms":
        return f"{value:.1f} ms"
    if unit == "MB":
        return f"{value:.0f} MB"
    return f"{value:.1f} /s"


def render_table(figures: Sequence[Figure], header: dict[str, Any]) -> str:
    lines = [
        "memsearch benchmark — "
        + ", ".join(
            f"{k}: {v}" for k, v in header.items() if k in ("date", "git", "machine", "python", "seed", "mode")
        ),
        "",
    ]
    columns = ("figure", "runs", "median", "min", "max", "target", "result", "bg CPUs")
    rows = []
    for fig in figures:
        values = sorted(fig.values)
        target = (
            "" if fig.target is None else f"{'≥' if fig.higher_is_better else '≤'} {fmt_value(fig.target, fig.unit)}"
        )
        result = {None: "info", True: "PASS", False: "FAIL"}[fig.passed]
        rows.append(
            (
                fig.name,
                str(len(values)),
                fmt_value(fig.median, fig.unit),
                fmt_value(values[0], fig.unit),
                fmt_value(values[-1], fig.unit),
                target,
                result,
                "" if fig.extra.get("background_cores") is None else f"{fig.extra['background_cores']:.2f}",
            )
        )
    widths = [max(len(columns[i]), *(len(row[i]) for row in rows)) for i in range(len(columns))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(cells)
        ).rstrip()

    lines.append(line(columns))
    lines.append(line(["-" * w for w in widths]))
    lines += [line(row) for row in rows]
    notes = [f"  {fig.name.strip()}: {fig.note}" for fig in figures if fig.note]
    notes += [
        f"  {fig.name.strip()}: median CPU time {fig.extra['cpu_s_median']:.3f} s (user + system)"
        for fig in figures
        if "cpu_s_median" in fig.extra
    ]
    notes += [
        f"  {fig.name.strip()}: median CPU time {fig.extra['cpu_ms_median']:.1f} ms"
        for fig in figures
        if "cpu_ms_median" in fig.extra
    ]
    notes += [
        f"  {fig.name.strip()}: {fig.extra['memories_per_floor']:.1f} memories per floor "
        f"(floor: a fixed Python loop, median {fig.extra['floor_s'] * 1000:.0f} ms, "
        "measured next to each run)"
        for fig in figures
        if "memories_per_floor" in fig.extra
    ]
    notes += [
        f"  {fig.name.strip()}: {fig.extra['numpy_floor_ratio']:.2f}x the numpy floor"
        + (
            f" (CPU {fig.extra['cpu_numpy_floor_ratio']:.2f}x; goal ≤ {fig.extra['numpy_floor_ratio_target']}x: "
            f"{'PASS' if fig.extra['cpu_numpy_floor_ratio'] <= fig.extra['numpy_floor_ratio_target'] else 'FAIL'})"
            if "cpu_numpy_floor_ratio" in fig.extra
            else ""
        )
        for fig in figures
        if "numpy_floor_ratio" in fig.extra
    ]
    notes.append(
        "  bg CPUs: how many CPUs other processes kept busy, on average, while the figure was measured "
        f"(of {os.cpu_count()}); load average {header.get('loadavg_start')} at the start, "
        f"{header.get('loadavg_end')} at the end"
    )
    if notes:
        lines += ["", "notes:", *notes]
    return "\n".join(lines)


# -- main -------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--sizes", default=None, help="store sizes for the search figures (default 10000,100000)")
    parser.add_argument("--quick", action="store_true", help="10k only, 5 runs, 50 queries, import of 1000")
    parser.add_argument("--runs", type=int, default=None, help="runs of each process figure (default 9; quick 5)")
    parser.add_argument("--queries", type=int, default=None, help="API queries per size (default 200; quick 50)")
    parser.add_argument("--import-n", type=int, default=None, help="memories to import (default 2000; quick 1000)")
    parser.add_argument("--import-runs", type=int, default=5, help="runs of each import figure (default 5)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--locomo",
        type=Path,
        default=default_locomo(),
        help="LoCoMo JSON for the conversation import figure (default: shared/benchdata/locomo_dev.json)",
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"stores, embeddings, results (default {DEFAULT_OUT})"
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=DEFAULT_CACHE,
        help=f"MEMSEARCH_CACHE_DIR for all runs (default {DEFAULT_CACHE})",
    )
    parser.add_argument("--memsearch", default=None, help="the memsearch executable (default: next to this python)")
    parser.add_argument(
        "--skip",
        default="",
        help="parts to skip (comma-separated): help, cli-search, startup, phases, api-search, peers, import, "
        "conversation-import",
    )
    parser.add_argument(
        "--wait-idle",
        type=float,
        default=0.0,
        help="before each group of figures, wait up to this many seconds for other processes to leave the CPUs "
        "idle, and take a group again (up to twice) if they got busy meanwhile",
    )
    parser.add_argument(
        "--million",
        action="store_true",
        help="also the scale figures on a generated store (vectors generated): hybrid search p50/p95, recall@10 of "
        "the vector search against exact, index build time and size, a search process's peak memory",
    )
    parser.add_argument(
        "--million-size", type=int, default=1_000_000, help="memories of the --million store (default 1000000)"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="a folder holding another memsearch package (`git archive main memsearch | tar -x -C DIR`): its "
        "fresh-shell searches take turns with these in the startup figures (a before/after under one load)",
    )
    parser.add_argument("--build-only", action="store_true", help="only build (and cache) the stores, then exit")
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")
    args = parser.parse_args(argv)
    quick = args.quick
    args.sizes = [int(s) for s in (args.sizes or ("10000" if quick else "10000,100000")).split(",") if s]
    args.runs = args.runs or (5 if quick else 9)
    args.queries = args.queries or (50 if quick else 200)
    args.import_n = args.import_n or (1000 if quick else 2000)
    args.skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if args.runs < 5 or args.import_runs < 5 or args.queries < 50:
        log("warning: fewer than 5 runs or 50 queries is below the benchmark's own standard")
    return args


def git_state() -> str | None:
    try:
        head = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(
            ["git", "-C", str(HERE.parent), "status", "--porcelain", "--", "memsearch"], capture_output=True, text=True
        )
    except OSError:
        return None
    if head.returncode:
        return None
    return head.stdout.strip() + (" + uncommitted changes in memsearch/" if dirty.stdout.strip() else "")


def machine() -> str:
    """The CPU model and the memory, as /proc tells them (empty where it does not)."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        memory = int(Path("/proc/meminfo").read_text().split()[1]) / 2**20
    except (OSError, ValueError, IndexError):
        return ""
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")), "")
    return f"{model}, {os.cpu_count()} CPUs, {memory:.0f} GB"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # bench/peers.py imports this module as `bench`: the same module when it runs as a script.
    sys.modules.setdefault("bench", sys.modules[__name__])
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import peers

    peers.quiet_peers()
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    cache = args.cache_dir.resolve()
    os.environ["MEMSEARCH_CACHE_DIR"] = str(cache)  # this process's encoder, and every child's
    env = dict(os.environ)
    # An installed memsearch has its bytecode compiled (pip does it); without the cache files every
    # process would compile each module it imports again (a fifth of a search's start-up). The
    # untimed warm-up run of each figure writes them.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    exe = args.memsearch or str(Path(sys.executable).with_name("memsearch"))
    if not Path(exe).is_file():
        exe = shutil.which("memsearch") or exe
    now = datetime.now(UTC)
    header: dict[str, Any] = {
        "date": now.isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "git": git_state(),
        "seed": args.seed,
        "mode": "quick" if args.quick else "full",
        "sizes": args.sizes,
        "memsearch": exe,
        "cache_dir": str(cache),
        "out": str(out),
        "generator_version": GENERATOR_VERSION,
        "env": {k: v for k, v in os.environ.items() if k.startswith(("MEMSEARCH_", "OMP_", "OPENBLAS_"))},
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        "proc_loadavg_start": Path("/proc/loadavg").read_text().strip(),
        "machine": machine(),
    }
    figures: list[Figure] = []
    total_started = time.perf_counter()

    def measured(what: str, take: Callable[[], list[Figure]]) -> list[Figure]:
        """Take a group of figures, tagged with the background load; with --wait-idle, wait for a
        quiet machine first and take them again (up to twice) if other processes got busy meanwhile."""
        for attempt in range(3):
            settle(args.wait_idle)
            log(f"timing {what}" + (f" (attempt {attempt + 1})" if attempt else ""))
            meter = Background()
            taken = take()
            cores = meter.stop()
            if not args.wait_idle or cores is None or cores <= BUSY or attempt == 2:
                return [fig.tag(cores) for fig in taken]
            log(f"  other processes kept {cores:.2f} CPUs busy meanwhile; taking it again")
        raise AssertionError("unreachable")

    figures += measured(
        "`python -c pass`",
        lambda: [
            Figure(
                "python -c pass (process)",
                "s",
                [run_process([sys.executable, "-c", "pass"], env)[0] for _ in range(args.runs)],
                note="interpreter start, for scale",
            )
        ],
    )
    if "help" not in args.skip:
        run_process([exe, "--help"], env)  # untimed warm-up

        def take_help() -> list[Figure]:
            times = [run_process([exe, "--help"], env)[0] for _ in range(args.runs)]
            return [Figure("CLI `memsearch --help` (process)", "s", times, 0.12, extra=cpu_of_last(args.runs))]

        figures += measured("`memsearch --help`", take_help)

    stores: dict[int, Path] = {}
    peer_notes: list[str] = []
    if {"cli-search", "startup", "phases", "api-search", "peers"} - args.skip or args.build_only:
        for size in sorted(args.sizes):
            path, built = build_store(size, args.seed, out, now)
            stores[size] = path
            if built is not None:
                figures.append(Figure(f"store build, {size} memories (one-off)", "s", [built]))
        if args.build_only:
            return 0
        # One pool of distinct queries, drawn from the corpus of the smallest store.
        memories = corpus(min(args.sizes), args.seed, now)
        pool = queries(2 * args.runs + args.queries, args.seed, memories)
        cli_queries, phase_queries, api_queries = (
            pool[: args.runs],
            pool[args.runs : 2 * args.runs],
            pool[2 * args.runs :],
        )
        # The process target is for a 10k store; other sizes only when 10k is not among them.
        process_sizes = [size for size in stores if size == 10000 or 10000 not in stores]

        for size in process_sizes if "cli-search" not in args.skip else ():

            def take_cli(size: int = size) -> list[Figure]:
                fig = bench_cli_search(exe, stores[size], cli_queries, env, label(size))
                fig.extra.update(cpu_of_last(args.runs))
                if size != 10000:
                    fig.target = None
                return [fig]

            figures += measured(f"{args.runs} `memsearch search` processes on the {size} store", take_cli)
        for size in process_sizes if "startup" not in args.skip else ():
            figures += measured(
                f"{args.runs} lexical and served search processes on the {size} store",
                lambda size=size: bench_startup(exe, stores[size], cli_queries, env, label(size), args.baseline),
            )
        for size in process_sizes if "phases" not in args.skip else ():
            figures += measured(
                f"the phases of {args.runs} search processes on the {size} store",
                lambda size=size: bench_phases(stores[size], phase_queries, env, label(size)),
            )
        for size in stores if "api-search" not in args.skip else ():
            target = {10000: 25.0, 100000: 100.0}.get(size)
            figures += measured(
                f"{len(api_queries)} API searches on the {size} store",
                lambda size=size, target=target: bench_api_search(stores[size], api_queries, label(size), target),
            )

    if args.million:
        scale_queries = queries(args.queries, args.seed + 7, corpus(10_000, args.seed, now))
        figures += measured(
            f"the scale figures on a generated {args.million_size} store",
            lambda: bench_million(args.million_size, args.seed, out, scale_queries, env, now),
        )

    if "import" not in args.skip:
        figures += measured(
            f"imports of {args.import_n} memories ({args.import_runs} runs each)",
            lambda: list(bench_import(exe, args.import_n, args.seed, args.import_runs, out, env, now)),
        )

    if "conversation-import" not in args.skip and args.locomo is not None:
        figures += measured(
            f"imports of a LoCoMo conversation ({args.import_runs} runs)",
            lambda: [bench_conversation_import(args.locomo, args.import_runs, out)],
        )

    # Last: the peers' stores (Chroma's and LanceDB's threads, their memory) must not disturb the figures above.
    for size in stores if "peers" not in args.skip else ():

        def take_peers(size: int = size) -> list[Figure]:
            taken, skipped = peers.bench_peers(size, stores[size], api_queries, args.seed, out, now)
            peer_notes.extend(note for note in skipped if note not in peer_notes)
            return taken

        figures += measured(f"memsearch beside its floor and peers on the {size} store", take_peers)

    floor_ratios(figures)
    goals = peers.goal_rows(figures)
    header["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    header["proc_loadavg_end"] = Path("/proc/loadavg").read_text().strip()
    header["peers_skipped"] = peer_notes
    header["total_seconds"] = round(time.perf_counter() - total_started, 1)
    document = {"meta": header, "figures": [f.to_dict() for f in figures], "goals": peers.goals_json(goals)}
    (out / "last-results.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        print(render_table(figures, header))
        print("\n" + peers.render_goals(goals))
        for note in peer_notes:
            print(f"  peer {note}")
        print(f"\ntotal {header['total_seconds']} s; JSON in {out / 'last-results.json'}")
    return 0 if all(f.passed is not False for f in figures) else 1


def label(size: int) -> str:
    return f"{size // 1000}k" if size % 1000 == 0 else str(size)


if __name__ == "__main__":
    sys.exit(main())
