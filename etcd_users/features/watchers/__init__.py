"""The watcher-only workload: prefix watchers that fan out, some of them slow, and what they saw."""
