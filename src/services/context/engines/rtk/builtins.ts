/**
 * rtk's built-in filters, as data (the same shape a project's filter file uses). Chosen by the
 * command line first (the first filter whose `match.command` matches), then by the output's shape
 * (`match.output`, tested with the `m` flag). Order matters: the first match wins.
 */
import type { FilterSpec } from "./filter.js"

/** A command at the start of the line, after `&&`, `;`, `|`, `(`, a quote (`bash -lc 'git status'`) or a space (`sudo`, `env X=1`…). */
const cmd = (body: string): string => `(?:^|[;&|('"\`]\\s*|\\s)${body}`

export const BUILTIN_FILTERS: ReadonlyArray<FilterSpec> = [
  {
    id: "git-status",
    description: 'git status: drops the hint lines ((use "git add <file>..." ...)), keeps branch, state and files',
    match: {
      command: cmd("git(?:\\s+-C\\s+\\S+)?\\s+status\\b"),
      output: "^(?:On branch \\S+|HEAD detached at \\S+|Changes (?:not staged for commit|to be committed):|Untracked files:)$"
    },
    drop: [
      '^\\s*\\(use "git [^"]*"[^)]*\\)\\s*$',
      '^\\s*\\((?:commit or discard the untracked or modified content in submodules|all conflicts fixed: run "git commit")\\)\\s*$'
    ]
  },
  {
    id: "git-diff",
    description: "git diff/show: drops index lines, keeps file headers and hunks; a hunk over 80 lines keeps its first 30 and last 20",
    match: { command: cmd("git(?:\\s+-C\\s+\\S+)?\\s+(?:diff|show)\\b"), output: "^diff --git a/" },
    drop: ["^index [0-9a-f]+\\.\\.[0-9a-f]+(?: \\d+)?$"],
    sections: { start: "^@@ ", end: "^diff --git |^commit [0-9a-f]{7,40}", maxLines: 80, head: 30, tail: 20 }
  },
  {
    id: "git-log",
    description: "git log: one line per commit (short hash, refs, subject); author, date and body dropped",
    match: { command: cmd("git(?:\\s+-C\\s+\\S+)?\\s+log\\b(?!.*\\s(?:-p|--patch|--stat|-L))"), output: "^commit [0-9a-f]{40}" },
    records: { start: "^commit ([0-9a-f]{10})[0-9a-f]*( \\(.*\\))?$", fields: ["^ {4}(\\S.*)$"] }
  },
  {
    id: "test-js",
    description:
      "vitest/jest: drops passing and skipped test lines and run banners; keeps failures, their messages, diffs, code frames and the summary",
    match: {
      command: cmd("(?:(?:npm|pnpm|yarn|bun)\\s+(?:run\\s+)?test\\b|(?:npx\\s+|pnpm\\s+(?:exec\\s+)?|yarn\\s+)?(?:vitest|jest)\\b)"),
      output: "^\\s*(?:Test Files\\s+\\d+|Tests:\\s+\\d+.*total)"
    },
    drop: [
      "^\\s*[✓✔√]\\s",
      "^\\s*↓\\s",
      "^\\s*PASS\\s",
      "^\\s*RUN\\s+v\\d",
      "^\\s*Start at\\s",
      "^\\s*Duration\\s+[\\d.]+m?s\\s*\\(",
      "^\\s*Ran all test suites"
    ],
    replace: [{ pattern: "^⎯{5,}\\s*(.*?)\\s*⎯*$", with: "⎯⎯⎯ $1" }]
  },
  {
    id: "test-pytest",
    description:
      "pytest: drops PASSED lines, platform/plugin banners and per-file progress; keeps FAILURES, tracebacks, short summary and the totals",
    match: {
      command: cmd("(?:python3?\\s+-m\\s+)?pytest\\b"),
      output: "^=+ (?:test session starts|FAILURES|short test summary info) =+$"
    },
    drop: [
      "^\\S+::\\S+ PASSED(?:\\s+\\[\\s*\\d+%\\])?$",
      "^(?:platform \\w+ -- Python|cachedir: |rootdir: |configfile: |plugins: |collecting \\.\\.\\. )",
      "^\\S+\\.py \\.+\\s+\\[\\s*\\d+%\\]$"
    ]
  },
  {
    id: "test-go",
    description: "go test: drops === RUN/PAUSE/CONT lines and passing tests; keeps failures, their output and package results",
    match: { command: cmd("go\\s+test\\b"), output: "^(?:--- FAIL: \\S+|=== RUN\\s+\\S+|ok\\s+\\S+\\s+[\\d.]+s)" },
    drop: ["^=== (?:RUN|PAUSE|CONT|NAME)\\s", "^\\s*--- PASS: ", "^PASS$"]
  },
  {
    id: "test-cargo",
    description: "cargo test: drops passing tests and compile progress; keeps failures, panics, their output and test results",
    match: { command: cmd("cargo\\s+(?:test|nextest)\\b"), output: "^test result: (?:ok|FAILED)\\. \\d+ passed" },
    drop: [
      "^test \\S+ \\.\\.\\. ok$",
      "^\\s*(?:Compiling|Checking|Downloaded|Downloading|Fresh|Blocking|Locking|Updating|Adding)\\s+\\S",
      "^\\s*Running (?:unittests )?\\S+ \\(target/",
      "^running \\d+ tests?$"
    ]
  },
  {
    id: "npm-install",
    description: "npm/pnpm/yarn install: drops download progress, fetch logs and deprecation warnings; keeps errors and the summary",
    match: {
      command: cmd(
        "(?:npm\\s+(?:install|i|ci|add|update|up)|pnpm\\s+(?:install|i|add|update|up)|yarn(?:\\s+(?:install|add|upgrade))?\\s*$|yarn\\s+(?:install|add|upgrade))\\b"
      ),
      output: "^(?:npm (?:WARN|warn) deprecated |added \\d+ packages?|Progress: resolved \\d+|Packages: \\+\\d+|\\[\\d/\\d\\] )"
    },
    drop: [
      "^npm (?:WARN|warn) deprecated ",
      "^npm (?:http|sill|verb|timing) ",
      "^npm (?:notice|WARN|warn)\\s*$",
      "^Progress: resolved \\d+",
      "^\\++$",
      "^\\s*(?:Downloading|Downloaded) \\S+",
      "^(?:warning|WARN)\\s.*(?:deprecated|has unmet peer dependency|has incorrect peer dependency)",
      "^\\[\\d/\\d\\] ",
      "^info (?:fsevents|There appears to be trouble|No lockfile|Visit https)",
      "^ WARN  deprecated ",
      "^\\s*[├└│].*deprecated",
      "^(?:\\s*)?(?:⠋|⠙|⠹|⠸|⠼|⠴|⠦|⠧|⠇|⠏)"
    ]
  },
  {
    id: "pip-install",
    description:
      "pip install: drops collecting/downloading/cached/already-satisfied lines and progress; keeps errors and Successfully installed",
    match: {
      command: cmd("(?:python3?\\s+-m\\s+)?(?:pip3?|uv\\s+pip)\\s+install\\b"),
      output: "^(?:Collecting \\S+|Requirement already satisfied: |Successfully installed )"
    },
    drop: [
      "^\\s*Collecting \\S+",
      "^\\s*Downloading \\S+",
      "^\\s*Using cached \\S+",
      "^\\s*Obtaining \\S+",
      "^Requirement already satisfied: ",
      "^\\s*(?:Preparing|Getting requirements|Installing build dependencies|Building wheel|Created wheel|Stored in directory)",
      "^\\s*━+",
      "^Installing collected packages: "
    ]
  },
  {
    id: "ls-long",
    description: "ls -l: keeps names (directories with a trailing /) and sizes; drops permissions, owners, dates and the total line",
    match: {
      command: cmd("ls\\s+(?:-\\w*l\\w*|--format=long)"),
      output: "^total \\d+\\n[-dlcbps][rwxsStT-]{9}"
    },
    drop: ["^total \\d+(?:\\.\\d+)?[KMGT]?$", "^d[rwxsStT-]{9}[@+.]?\\s.*\\s\\.\\.?$"],
    replace: [
      {
        pattern:
          "^d[rwxsStT-]{9}[@+.]?\\s+\\d+\\s+\\S+\\s+\\S+\\s+\\S+\\s+(?:\\w{3}\\s+\\d{1,2}|\\d{1,2}\\s+\\w{3}|\\d{4}-\\d\\d-\\d\\d)\\s+(?:\\d{1,2}:\\d\\d(?::\\d\\d(?:\\.\\d+)?)?(?: [+-]\\d{4})?|\\d{4})\\s(.*)$",
        with: "$1/"
      },
      {
        pattern:
          "^[-lcbps][rwxsStT-]{9}[@+.]?\\s+\\d+\\s+\\S+\\s+\\S+\\s+(\\S+)\\s+(?:\\w{3}\\s+\\d{1,2}|\\d{1,2}\\s+\\w{3}|\\d{4}-\\d\\d-\\d\\d)\\s+(?:\\d{1,2}:\\d\\d(?::\\d\\d(?:\\.\\d+)?)?(?: [+-]\\d{4})?|\\d{4})\\s(.*)$",
        with: "$2 $1"
      }
    ]
  },
  {
    id: "find",
    description: "find/fd: duplicate paths dropped; over 30 paths, grouped by directory as dir/{a,b,c}",
    match: { command: cmd("(?:find|fd|fdfind)\\s") },
    dedupe: true,
    group: { pattern: "^(.*/)([^/{}]+)$", minLines: 30, format: "braces" }
  },
  {
    id: "grep",
    description: "grep/rg/git grep: duplicate lines dropped; over 30 matches, grouped by file (file: then one indented line:match per hit)",
    match: { command: cmd("(?:grep|egrep|fgrep|rg|ag|git\\s+grep)\\s") },
    dedupe: true,
    group: { pattern: "^([^:\\s][^:\\n]*):(\\d+[:-].*)$", minLines: 30, format: "indent" }
  },
  {
    id: "build-tsc",
    description:
      "tsc: drops watch-mode banners and file listings; keeps errors and warnings with their location and continuation lines, and the error count",
    match: {
      command: cmd("(?:npx\\s+)?(?:tsc|vue-tsc)\\b"),
      output: "^\\S+\\(\\d+,\\d+\\): error TS\\d+: |^\\S+:\\d+:\\d+ - error TS\\d+: "
    },
    drop: [
      "^\\[?\\d{1,2}:\\d\\d:\\d\\d(?: [AP]M)?\\]? - (?:Starting compilation|File change detected|Starting incremental compilation)",
      "^\\[?\\d{1,2}:\\d\\d:\\d\\d(?: [AP]M)?\\]? - Found 0 errors"
    ]
  },
  {
    id: "build-cargo",
    description:
      "cargo build/check/clippy: drops Compiling/Checking/Downloading progress; keeps errors and warnings with their --> locations and code frames",
    match: { command: cmd("cargo\\s+(?:build|check|clippy|run)\\b"), output: "^\\s+Compiling \\S+ v\\d" },
    drop: ["^\\s*(?:Compiling|Checking|Downloaded|Downloading|Fresh|Blocking|Locking|Updating|Adding)\\s+\\S", "^\\s*Building \\[[=> ]*\\]"]
  },
  {
    id: "build-make",
    description:
      "make/cmake/ninja: keeps error and warning lines with 2 lines of context and make's own failure lines; drops compiler invocations and directory changes",
    match: { command: cmd("(?:make|gmake|cmake\\s+--build|ninja)\\b"), output: "^make(?:\\[\\d+\\])?: (?:Entering|Leaving) directory" },
    drop: [
      "^\\s*(?:cc|gcc|g\\+\\+|c\\+\\+|clang|clang\\+\\+|ar|ld|libtool|ranlib)\\s",
      "^make(?:\\[\\d+\\])?: (?:Entering|Leaving) directory"
    ],
    keep: ["(?:^|\\s)(?:error|warning|Error|Warning|ERROR|WARNING)\\b", "^make(?:\\[\\d+\\])?: \\*\\*\\*", "^\\S+:\\d+(?::\\d+)?: "],
    context: 2
  }
]

export const BUILTIN_FILTER_IDS: ReadonlyArray<string> = BUILTIN_FILTERS.map((f) => f.id)
