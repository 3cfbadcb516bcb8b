import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it, vi } from "vitest"
import type { FormatId } from "../src/domain/canonical.js"
import { decodeGenerateRequest } from "../src/upstream/formats/ollama.js"
import { FORMATS } from "../src/upstream/formats/registry.js"
import { tokenizerFamily } from "../src/services/context/estimate.js"
import type { Segment } from "../src/services/context/types.js"
import { commandOf, mapSegments, segmentsOf } from "../src/services/context/walk.js"

const __dirname = path.dirname(fileURLToPath(import.meta.url))
const CLIENTS = path.resolve(__dirname, "fixtures/clients")

type Path = ReadonlyArray<string | number>
type Json = Record<string, unknown>

const upper = (text: string) => text.toUpperCase()
const identity = (text: string) => text

const deepFreeze = <T>(v: T): T => {
  if (v !== null && typeof v === "object") {
    for (const x of Object.values(v as object)) deepFreeze(x)
    Object.freeze(v)
  }
  return v
}

const getAt = (v: unknown, p: Path): unknown => p.reduce<unknown>((o, k) => (o as Record<string | number, unknown>)[k], v)

const setAt = (v: unknown, p: Path, value: unknown): void => {
  const parent = getAt(v, p.slice(0, -1)) as Record<string | number, unknown>
  parent[p[p.length - 1]!] = value
}

/** Everything off the changed paths is the very same object in the new body (structural sharing). */
const expectShared = (before: unknown, after: unknown, paths: ReadonlyArray<Path>, at: Path = []): void => {
  const onPath = paths.some((p) => at.length < p.length && at.every((k, i) => p[i] === k))
  if (!onPath) {
    if (!paths.some((p) => p.length === at.length && p.every((k, i) => at[i] === k))) expect(after, at.join(".")).toBe(before)
    return
  }
  expect(after).not.toBe(before)
  for (const k of Object.keys(before as object)) {
    const key = Array.isArray(before) ? Number(k) : k
    expectShared((before as Record<string, unknown>)[k], (after as Record<string, unknown>)[k], paths, [...at, key])
  }
}

interface Expected {
  readonly text: string
  readonly role: Segment["role"]
  readonly kind: Segment["kind"]
  readonly turn: number
  readonly turns: number
  readonly toolName?: string
  readonly command?: string
  /** Where the text sits in the body. */
  readonly at: Path
}

const seg = (
  role: Segment["role"],
  kind: Segment["kind"],
  turn: number,
  turns: number,
  at: Path,
  text: string,
  tool?: { toolName?: string; command?: string }
): Expected => ({
  text,
  role,
  kind,
  turn,
  turns,
  ...tool,
  at
})

/**
 * Walks `body` (frozen: a mutation throws) and checks: the segments found are exactly `expected`
 * (texts, roles, kinds, tools, commands, turns) and sit at their paths; upper-casing changes
 * exactly those texts and shares everything else; the identity answers undefined.
 */
const expectWalk = (format: FormatId, endpoint: string, raw: Json, expected: ReadonlyArray<Expected>) => {
  const body = deepFreeze(structuredClone(raw))
  const snapshot = structuredClone(raw)
  const found = segmentsOf(format, endpoint, body)
  expect(found).toStrictEqual(
    expected.map(({ text, at: _at, ...s }) => ({
      text,
      segment: {
        role: s.role,
        kind: s.kind,
        ...(s.toolName !== undefined ? { toolName: s.toolName } : {}),
        ...(s.command !== undefined ? { command: s.command } : {}),
        turn: s.turn,
        turns: s.turns
      }
    }))
  )
  for (const e of expected) expect(getAt(body, e.at)).toBe(e.text)
  // Every expected text has lower-case letters, so upper-casing must change it.
  for (const e of expected) expect(e.text.toUpperCase(), e.text).not.toBe(e.text)

  expect(mapSegments(format, endpoint, body, identity)).toBeUndefined()

  const out = mapSegments(format, endpoint, body, upper)
  const want = structuredClone(raw)
  for (const e of expected) setAt(want, e.at, e.text.toUpperCase())
  expect(out).toStrictEqual(want)
  expectShared(
    body,
    out,
    expected.map((e) => e.at)
  )
  expect(body).toStrictEqual(snapshot)
  return out!
}

// ---------------------------------------------------------------- per format

describe("openai-chat", () => {
  /** Shapes of Kilo, Qwen Code and opencode (test/fixtures/clients/cli). */
  const body = {
    model: "fake-model",
    max_tokens: 32000,
    messages: [
      { role: "system", content: "You are Kilo, a highly skilled software engineer." },
      {
        role: "user",
        content: [
          { type: "text", text: "USE_TOOL run echo" },
          { type: "text", text: "\n\n<environment_details>\nMessage time: 2026-11-22T01:44:09Z\n</environment_details>" },
          { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } }
        ]
      },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "call_1", type: "function", function: { name: "bash", arguments: '{"command":"git status","description":"status"}' } },
          { id: "call_2", type: "function", function: { name: "run_shell_command", arguments: '{"cmd":["bash","-lc","ls -la"]}' } },
          { id: "call_3", type: "function", function: { name: "read_file", arguments: '{"path":"README.md"}' } }
        ]
      },
      { role: "tool", tool_call_id: "call_1", content: "On branch main\nnothing to commit, working tree clean\n" },
      { role: "tool", tool_call_id: "call_2", content: [{ type: "text", text: "total 8\ndrwxr-xr-x 2 user user 4096 .\n" }] },
      { role: "tool", tool_call_id: "call_3", content: "# Project\n" },
      { role: "assistant", content: "The tree is clean.", reasoning_content: "Checked git and ls." },
      { role: "developer", content: "Answer briefly." },
      { role: "user", content: "" },
      { role: "user", content: "thanks" }
    ],
    tools: [
      {
        type: "function",
        function: {
          name: "bash",
          description: "Run a command",
          parameters: { type: "object", properties: { command: { type: "string" } } }
        }
      }
    ],
    stream: true,
    stream_options: { include_usage: true }
  }

  it("finds system, user, assistant and tool texts with the calls' names and commands", () => {
    const n = 10
    expectWalk("openai-chat", "chat.completions", body, [
      seg("system", "prose", 0, n, ["messages", 0, "content"], "You are Kilo, a highly skilled software engineer."),
      seg("user", "prose", 1, n, ["messages", 1, "content", 0, "text"], "USE_TOOL run echo"),
      seg(
        "user",
        "prose",
        1,
        n,
        ["messages", 1, "content", 1, "text"],
        "\n\n<environment_details>\nMessage time: 2026-11-22T01:44:09Z\n</environment_details>"
      ),
      seg("tool", "tool-result", 3, n, ["messages", 3, "content"], "On branch main\nnothing to commit, working tree clean\n", {
        toolName: "bash",
        command: "git status"
      }),
      seg("tool", "tool-result", 4, n, ["messages", 4, "content", 0, "text"], "total 8\ndrwxr-xr-x 2 user user 4096 .\n", {
        toolName: "run_shell_command",
        command: "ls -la"
      }),
      seg("tool", "tool-result", 5, n, ["messages", 5, "content"], "# Project\n", { toolName: "read_file" }),
      seg("assistant", "prose", 6, n, ["messages", 6, "content"], "The tree is clean."),
      seg("system", "prose", 7, n, ["messages", 7, "content"], "Answer briefly."),
      seg("user", "prose", 9, n, ["messages", 9, "content"], "thanks")
    ])
  })

  it("walks legacy completions' prompt (a string or strings) as user prose", () => {
    expectWalk("openai-chat", "completions", { model: "m", prompt: "Say hi", max_tokens: 5 }, [
      seg("user", "prose", 0, 1, ["prompt"], "Say hi")
    ])
    expectWalk("openai-chat", "completions", { model: "m", prompt: ["one", "two"] }, [
      seg("user", "prose", 0, 2, ["prompt", 0], "one"),
      seg("user", "prose", 1, 2, ["prompt", 1], "two")
    ])
    // Without the completions endpoint a prompt is not a chat field.
    expect(segmentsOf("openai-chat", "chat.completions", { model: "m", prompt: "Say hi" })).toEqual([])
  })

  it("names a legacy function result by its name", () => {
    expectWalk("openai-chat", "chat.completions", { model: "m", messages: [{ role: "function", name: "lookup", content: "forty-two" }] }, [
      seg("tool", "tool-result", 0, 1, ["messages", 0, "content"], "forty-two", { toolName: "lookup" })
    ])
  })
})

describe("openai-responses", () => {
  /** Shapes of Codex (exec_command, apply_patch, local shell) and opencode. */
  const body = {
    model: "gpt-5",
    instructions: "You are Codex, a coding agent.",
    input: [
      {
        type: "message",
        id: "msg_1",
        role: "developer",
        content: [{ type: "input_text", text: "<permissions instructions>\nsandboxed\n</permissions instructions>" }]
      },
      {
        type: "message",
        role: "user",
        content: [
          { type: "input_text", text: "USE_TOOL run echo" },
          { type: "input_image", image_url: "data:image/png;base64,iVBORw0KGgo=" },
          { type: "input_file", file_id: "file_1" }
        ]
      },
      {
        type: "reasoning",
        id: "rs_1",
        summary: [{ type: "summary_text", text: "Plan: run echo." }],
        encrypted_content: "gAAAAABencrypted"
      },
      {
        type: "function_call",
        status: "completed",
        id: "fc_1",
        name: "exec_command",
        arguments: '{"cmd":"echo TOOL_OK"}',
        call_id: "call_a"
      },
      {
        type: "function_call_output",
        id: "fco_1",
        call_id: "call_a",
        output: "Chunk ID: f3ad3f\nWall time: 0.1712 seconds\nProcess exited with code 0\nOutput:\nTOOL_OK\n"
      },
      { type: "custom_tool_call", call_id: "call_b", name: "apply_patch", input: "*** Begin Patch\n*** End Patch" },
      {
        type: "custom_tool_call_output",
        call_id: "call_b",
        output: [{ type: "input_text", text: "Success. Updated the following files:\nM a.ts" }]
      },
      {
        type: "local_shell_call",
        call_id: "call_c",
        status: "completed",
        action: { type: "exec", command: ["bash", "-lc", "git diff --stat"] }
      },
      { type: "local_shell_call_output", call_id: "call_c", output: " a.ts | 2 +-\n" },
      {
        type: "message",
        role: "assistant",
        content: [
          { type: "output_text", text: "Done.", annotations: [] },
          { type: "refusal", refusal: "no" }
        ]
      },
      { role: "user", content: "ship it" }
    ],
    tools: [{ type: "function", name: "exec_command", parameters: { type: "object", properties: { cmd: { type: "string" } } } }],
    include: ["reasoning.encrypted_content"],
    store: false
  }

  it("finds instructions, messages and every kind of tool output, never reasoning", () => {
    const n = 11
    expectWalk("openai-responses", "responses", body, [
      seg("system", "prose", 0, n, ["instructions"], "You are Codex, a coding agent."),
      seg(
        "system",
        "prose",
        0,
        n,
        ["input", 0, "content", 0, "text"],
        "<permissions instructions>\nsandboxed\n</permissions instructions>"
      ),
      seg("user", "prose", 1, n, ["input", 1, "content", 0, "text"], "USE_TOOL run echo"),
      seg(
        "tool",
        "tool-result",
        4,
        n,
        ["input", 4, "output"],
        "Chunk ID: f3ad3f\nWall time: 0.1712 seconds\nProcess exited with code 0\nOutput:\nTOOL_OK\n",
        {
          toolName: "exec_command",
          command: "echo TOOL_OK"
        }
      ),
      seg("tool", "tool-result", 6, n, ["input", 6, "output", 0, "text"], "Success. Updated the following files:\nM a.ts", {
        toolName: "apply_patch"
      }),
      seg("tool", "tool-result", 8, n, ["input", 8, "output"], " a.ts | 2 +-\n", { toolName: "local_shell", command: "git diff --stat" }),
      seg("assistant", "prose", 9, n, ["input", 9, "content", 0, "text"], "Done."),
      seg("user", "prose", 10, n, ["input", 10, "content"], "ship it")
    ])
  })

  it("walks a string input as the user's turn", () => {
    expectWalk("openai-responses", "responses.ws", { model: "gpt-5", instructions: "Be brief.", input: "say hi" }, [
      seg("system", "prose", 0, 1, ["instructions"], "Be brief."),
      seg("user", "prose", 0, 1, ["input"], "say hi")
    ])
  })
})

describe("anthropic", () => {
  /** Shapes of Claude Code and opencode (system blocks with cache_control, tool_result strings and blocks). */
  const body = {
    model: "claude-sonnet-4-5",
    max_tokens: 32000,
    system: [
      { type: "text", text: "x-anthropic-billing-header: cc_version=2.1.330" },
      { type: "text", text: "You are Claude Code, Anthropic's official CLI.", cache_control: { type: "ephemeral" } }
    ],
    messages: [
      {
        role: "user",
        content: [
          { type: "text", text: "<system-reminder>\nToday's date is 2026-11-22.\n</system-reminder>" },
          { type: "text", text: "USE_TOOL run echo", cache_control: { type: "ephemeral" } }
        ]
      },
      {
        role: "assistant",
        content: [
          { type: "thinking", thinking: "I should run it.", signature: "EqQBCkYIBxgC" },
          { type: "redacted_thinking", data: "EmwKAhgBEgy" },
          { type: "text", text: "Running it." },
          { type: "tool_use", id: "toolu_1", name: "Bash", input: { command: "echo TOOL_OK", description: "echo" } },
          { type: "tool_use", id: "toolu_2", name: "Read", input: { file_path: "/work/README.md" } }
        ]
      },
      {
        role: "user",
        content: [
          {
            tool_use_id: "toolu_1",
            type: "tool_result",
            content: "TOOL_OK\nexit 0\n",
            is_error: false,
            cache_control: { type: "ephemeral" }
          },
          {
            type: "tool_result",
            tool_use_id: "toolu_2",
            content: [
              { type: "text", text: "     1\t# Project\n" },
              { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } }
            ]
          }
        ]
      },
      {
        role: "user",
        content: [
          { type: "document", source: { type: "text", media_type: "text/plain", data: "a document" } },
          { type: "image", source: { type: "url", url: "https://example.invalid/x.png" } },
          { type: "text", text: "what now?" }
        ]
      },
      { role: "assistant", content: "Plain string answer." }
    ],
    tools: [{ name: "Bash", description: "Run a command", input_schema: { type: "object", properties: { command: { type: "string" } } } }],
    thinking: { type: "enabled", budget_tokens: 31999 }
  }

  it("finds system blocks, texts and tool results; thinking, images and documents stay; cache_control stays on its block", () => {
    const n = 5
    const out = expectWalk("anthropic", "messages", body, [
      seg("system", "prose", 0, n, ["system", 0, "text"], "x-anthropic-billing-header: cc_version=2.1.330"),
      seg("system", "prose", 0, n, ["system", 1, "text"], "You are Claude Code, Anthropic's official CLI."),
      seg(
        "user",
        "prose",
        0,
        n,
        ["messages", 0, "content", 0, "text"],
        "<system-reminder>\nToday's date is 2026-11-22.\n</system-reminder>"
      ),
      seg("user", "prose", 0, n, ["messages", 0, "content", 1, "text"], "USE_TOOL run echo"),
      seg("assistant", "prose", 1, n, ["messages", 1, "content", 2, "text"], "Running it."),
      seg("tool", "tool-result", 2, n, ["messages", 2, "content", 0, "content"], "TOOL_OK\nexit 0\n", {
        toolName: "Bash",
        command: "echo TOOL_OK"
      }),
      seg("tool", "tool-result", 2, n, ["messages", 2, "content", 1, "content", 0, "text"], "     1\t# Project\n", { toolName: "Read" }),
      seg("user", "prose", 3, n, ["messages", 3, "content", 2, "text"], "what now?"),
      seg("assistant", "prose", 4, n, ["messages", 4, "content"], "Plain string answer.")
    ])
    const blocks = (out["messages"] as Array<{ content: Array<Json> }>)[0]!.content
    expect(blocks[1]).toStrictEqual({ type: "text", text: "USE_TOOL RUN ECHO", cache_control: { type: "ephemeral" } })
  })

  it("walks a string system and a system message inside messages (Claude Code sends one)", () => {
    expectWalk(
      "anthropic",
      "messages",
      {
        model: "m",
        system: "Be brief.",
        messages: [
          { role: "system", content: "More rules." },
          { role: "user", content: "hi" }
        ]
      },
      [
        seg("system", "prose", 0, 2, ["system"], "Be brief."),
        seg("system", "prose", 0, 2, ["messages", 0, "content"], "More rules."),
        seg("user", "prose", 1, 2, ["messages", 1, "content"], "hi")
      ]
    )
  })
})

describe("gemini", () => {
  /** Shapes of the Gemini CLI (functionResponse.response.output, thought signatures). */
  const body = {
    contents: [
      {
        role: "user",
        parts: [{ text: "<session_context>\nThis is the Gemini CLI.\n</session_context>" }, { text: "USE_TOOL list files" }]
      },
      {
        role: "model",
        parts: [
          { text: "Listing the directory.", thought: true },
          {
            functionCall: { id: "ld_1", name: "list_directory", args: { dir_path: "." } },
            thoughtSignature: "skip_thought_signature_validator"
          }
        ]
      },
      {
        role: "user",
        parts: [
          {
            functionResponse: {
              id: "ld_1",
              name: "list_directory",
              response: { output: "Directory listing for /home/user/work:\nREADME.md (120 bytes)" }
            }
          }
        ]
      },
      { role: "model", parts: [{ functionCall: { name: "run_shell_command", args: { command: "npm test" } } }] },
      {
        role: "user",
        parts: [
          {
            functionResponse: {
              name: "run_shell_command",
              response: { stdout: "PASS 3 tests\n", stderr: "npm warn config\n", exitCode: 0 }
            }
          }
        ]
      },
      { role: "model", parts: [{ text: "All tests pass." }, { text: "Signed answer.", thoughtSignature: "c2lnbmVk" }] },
      { role: "user", parts: [{ text: "great" }, { inlineData: { mimeType: "image/png", data: "iVBORw0KGgo=" } }] }
    ],
    systemInstruction: { role: "user", parts: [{ text: "You are Gemini CLI, an autonomous CLI agent." }] },
    tools: [{ functionDeclarations: [{ name: "list_directory", parametersJsonSchema: { type: "object" } }] }],
    generationConfig: { temperature: 1, thinkingConfig: { includeThoughts: true } }
  }

  it("finds the system instruction, texts and function outputs; thoughts and signed parts stay", () => {
    const n = 7
    expectWalk("gemini", "streamGenerateContent", body, [
      seg("system", "prose", 0, n, ["systemInstruction", "parts", 0, "text"], "You are Gemini CLI, an autonomous CLI agent."),
      seg("user", "prose", 0, n, ["contents", 0, "parts", 0, "text"], "<session_context>\nThis is the Gemini CLI.\n</session_context>"),
      seg("user", "prose", 0, n, ["contents", 0, "parts", 1, "text"], "USE_TOOL list files"),
      seg(
        "tool",
        "tool-result",
        2,
        n,
        ["contents", 2, "parts", 0, "functionResponse", "response", "output"],
        "Directory listing for /home/user/work:\nREADME.md (120 bytes)",
        {
          toolName: "list_directory"
        }
      ),
      seg("tool", "tool-result", 4, n, ["contents", 4, "parts", 0, "functionResponse", "response", "stdout"], "PASS 3 tests\n", {
        toolName: "run_shell_command",
        command: "npm test"
      }),
      seg("tool", "tool-result", 4, n, ["contents", 4, "parts", 0, "functionResponse", "response", "stderr"], "npm warn config\n", {
        toolName: "run_shell_command",
        command: "npm test"
      }),
      seg("assistant", "prose", 5, n, ["contents", 5, "parts", 0, "text"], "All tests pass."),
      seg("user", "prose", 6, n, ["contents", 6, "parts", 0, "text"], "great")
    ])
  })

  it("walks snake_case spellings and a string system instruction", () => {
    expectWalk(
      "gemini",
      "generateContent",
      {
        system_instruction: "Be brief.",
        contents: [
          { role: "model", parts: [{ function_call: { name: "shell", args: { cmd: "ls" } } }] },
          { role: "user", parts: [{ function_response: { name: "shell", response: { result: "a.txt" } } }] }
        ]
      },
      [
        seg("system", "prose", 0, 2, ["system_instruction"], "Be brief."),
        seg("tool", "tool-result", 1, 2, ["contents", 1, "parts", 0, "function_response", "response", "result"], "a.txt", {
          toolName: "shell",
          command: "ls"
        })
      ]
    )
  })
})

describe("ollama", () => {
  it("finds api.chat messages and tool results (named by tool_name or by the open call)", () => {
    const body = {
      model: "llama3.2",
      messages: [
        { role: "system", content: "You are a helpful coding agent." },
        { role: "user", content: "run the tests", images: ["iVBORw0KGgo="] },
        {
          role: "assistant",
          content: "",
          thinking: "I should run them.",
          tool_calls: [{ function: { name: "shell", arguments: { args: ["npm", "test"] } } }]
        },
        { role: "tool", tool_name: "shell", content: "PASS 3 tests" },
        { role: "assistant", content: "All pass.", thinking: "done" }
      ],
      stream: false
    }
    expectWalk("ollama", "api.chat", body, [
      seg("system", "prose", 0, 5, ["messages", 0, "content"], "You are a helpful coding agent."),
      seg("user", "prose", 1, 5, ["messages", 1, "content"], "run the tests"),
      seg("tool", "tool-result", 3, 5, ["messages", 3, "content"], "PASS 3 tests", { toolName: "shell", command: "npm test" }),
      seg("assistant", "prose", 4, 5, ["messages", 4, "content"], "All pass.")
    ])
  })

  it("finds api.generate's system and prompt", () => {
    expectWalk(
      "ollama",
      "api.generate",
      { model: "llama3.2", system: "Be brief.", prompt: "Why is the sky blue?", images: ["iVBORw0KGgo="] },
      [seg("system", "prose", 0, 1, ["system"], "Be brief."), seg("user", "prose", 0, 1, ["prompt"], "Why is the sky blue?")]
    )
  })
})

describe("what the walker never does", () => {
  it("keeps a text when fn answers empty, and offers no empty text", () => {
    const body = {
      model: "m",
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "" },
            { type: "text", text: "keep me" }
          ]
        }
      ]
    }
    const seen: Array<string> = []
    expect(mapSegments("openai-chat", "chat.completions", body, (t) => (seen.push(t), ""))).toBeUndefined()
    expect(seen).toEqual(["keep me"])
  })

  it("walks malformed bodies without throwing (the decoder answers the 400)", () => {
    const odd: ReadonlyArray<Json> = [
      { messages: "nope" },
      {
        messages: [
          null,
          3,
          "x",
          { role: "user" },
          { role: "user", content: 5 },
          { role: "wizard", content: "x" },
          { role: "tool", content: [null, { type: "text" }] }
        ]
      },
      { input: { a: 1 }, instructions: 5 },
      { input: [null, { type: "function_call_output" }, { type: "message", role: "user", content: [7] }] },
      { system: 5, messages: [{ role: "assistant", content: [null, { type: "tool_result", content: 3 }] }] },
      {
        contents: [null, { parts: "x" }, { parts: [null, { functionResponse: "x" }, { functionResponse: { response: "s" } }] }],
        systemInstruction: 5
      },
      { prompt: 5, system: [1] }
    ]
    for (const body of odd) {
      for (const format of Object.keys(FORMATS) as Array<FormatId>) {
        for (const endpoint of [
          "chat.completions",
          "completions",
          "responses",
          "messages",
          "generateContent",
          "api.chat",
          "api.generate"
        ]) {
          expect(() => mapSegments(format, endpoint, body, upper)).not.toThrow()
        }
      }
    }
  })

  it("reads commands from command, cmd and args, as strings, argv arrays or JSON text", () => {
    expect(commandOf('{"command":"git status"}')).toBe("git status")
    expect(commandOf({ command: ["git", "log", "--oneline"] })).toBe("git log --oneline")
    expect(commandOf({ command: ["/bin/bash", "-lc", "cargo test 2>&1"] })).toBe("cargo test 2>&1")
    expect(commandOf({ cmd: "ls -la" })).toBe("ls -la")
    expect(commandOf({ args: ["npm", "test"] })).toBe("npm test")
    expect(commandOf({ file_path: "a.ts" })).toBeUndefined()
    expect(commandOf("{not json")).toBeUndefined()
  })
})

// ---------------------------------------------------------------- recorded traffic

interface Recorded {
  readonly name: string
  readonly format: FormatId
  readonly endpoint: string
  readonly body: Json
  readonly decode: (body: Json) => unknown
}

/** The inference requests of a recording, with their format and endpoint (others left out). */
const classify = (name: string, r: { method?: string; path?: string; body?: unknown }): Recorded | undefined => {
  const body = r.body as Json | null | undefined
  if (body === null || typeof body !== "object" || Array.isArray(body)) return undefined
  const p = r.path ?? ""
  const decode = (format: FormatId) => (b: Json) => FORMATS[format].decodeRequest(b)
  if (r.method === "WS" && body["type"] === "response.create") {
    const { type: _t, generate: _g, ...rest } = body
    return { name, format: "openai-responses", endpoint: "responses.ws", body: rest, decode: decode("openai-responses") }
  }
  if (r.method !== "POST") return undefined
  if (p === "/v1/chat/completions")
    return { name, format: "openai-chat", endpoint: "chat.completions", body, decode: decode("openai-chat") }
  if (p === "/v1/responses") return { name, format: "openai-responses", endpoint: "responses", body, decode: decode("openai-responses") }
  if (p === "/v1/messages" || p === "/v1/messages/count_tokens")
    return { name, format: "anthropic", endpoint: "messages", body, decode: decode("anthropic") }
  if (p === "/api/chat") return { name, format: "ollama", endpoint: "api.chat", body, decode: decode("ollama") }
  if (p === "/api/generate") return { name, format: "ollama", endpoint: "api.generate", body, decode: decodeGenerateRequest }
  const g = /\/models\/([^:/]+):(generateContent|streamGenerateContent)$/.exec(p)
  if (g) return { name, format: "gemini", endpoint: g[2]!, body: { ...body, model: g[1] }, decode: decode("gemini") }
  return undefined
}

const recorded = (): Array<Recorded> => {
  const out: Array<Recorded> = []
  const cli = path.join(CLIENTS, "cli")
  for (const file of fs
    .readdirSync(cli)
    .filter((f) => f.endsWith(".requests.jsonl"))
    .sort()) {
    fs.readFileSync(path.join(cli, file), "utf8")
      .split("\n")
      .filter((l) => l.trim() !== "")
      .forEach((line, i) => {
        const r = classify(`cli/${file}#${i + 1}`, JSON.parse(line))
        if (r) out.push(r)
      })
  }
  const sdk = path.join(CLIENTS, "sdk")
  for (const file of fs
    .readdirSync(sdk)
    .filter((f) => f.endsWith(".json"))
    .sort()) {
    const doc = JSON.parse(fs.readFileSync(path.join(sdk, file), "utf8")) as {
      requests?: Array<{ method?: string; path?: string; body?: unknown }>
    }
    ;(doc.requests ?? []).forEach((req, i) => {
      const r = classify(`sdk/${file}#${i + 1}`, req)
      if (r) out.push(r)
    })
  }
  return out
}

describe("recorded client requests", () => {
  const all = recorded()

  it("cover every format and every coding agent's recording", () => {
    expect(new Set(all.map((r) => r.format))).toEqual(new Set(["openai-chat", "openai-responses", "anthropic", "gemini", "ollama"]))
    const agents = fs.readdirSync(path.join(CLIENTS, "cli")).filter((f) => f.endsWith(".requests.jsonl"))
    for (const file of agents) {
      expect(
        all.some((r) => r.name.startsWith(`cli/${file}#`)),
        file
      ).toBe(true)
    }
    expect(all.filter((r) => r.name.startsWith("cli/")).length).toBeGreaterThan(60)
  })

  it.each(all.map((r) => [r.name, r] as const))(
    "%s: identity leaves it alone; upper-casing changes only text and still decodes",
    (_name, r) => {
      const body = deepFreeze(structuredClone(r.body))
      expect(() => r.decode(body as Json)).not.toThrow()
      const found = segmentsOf(r.format, r.endpoint, body)
      expect(found.length).toBeGreaterThan(0)
      expect(mapSegments(r.format, r.endpoint, body, identity)).toBeUndefined()
      const out = mapSegments(r.format, r.endpoint, body, upper)
      if (found.every((s) => s.text.toUpperCase() === s.text)) return expect(out).toBeUndefined()
      expect(out).toBeDefined()
      expect(() => r.decode(out!)).not.toThrow()
      // The same places hold the new texts, with the same segments.
      expect(segmentsOf(r.format, r.endpoint, out!)).toStrictEqual(found.map((s) => ({ text: s.text.toUpperCase(), segment: s.segment })))
    }
  )

  it("names the tools and commands of the recorded tool calls", () => {
    const tools = (name: string) =>
      all
        .filter((r) => r.name.startsWith(name))
        .flatMap((r) => segmentsOf(r.format, r.endpoint, r.body))
        .filter((s) => s.segment.kind === "tool-result")
        .map((s) => [s.segment.toolName, s.segment.command])
    expect(tools("cli/claude-p-toolcall-bearer")).toContainEqual(["Bash", "echo TOOL_OK"])
    expect(tools("cli/codex-exec-custom-provider-toolcall")).toContainEqual(["exec_command", "echo TOOL_OK"])
    expect(tools("cli/kilo-run-openai-compatible-toolcall")).toContainEqual(["bash", "echo TOOL_OK"])
    expect(tools("cli/qwen-p-toolcall-yolo")).toContainEqual(["run_shell_command", "echo TOOL_OK"])
    expect(tools("cli/gemini-p-toolcall")).toContainEqual(["list_directory", undefined])
  })
})

// ---------------------------------------------------------------- estimate

describe("estimate", () => {
  /** o200k packs a repeated common word far tighter than characters / 4: the two counts differ. */
  const LONG = "information ".repeat(20).trim()
  const body = {
    model: "m",
    messages: [
      { role: "system", content: "You are terse." },
      { role: "user", content: "hello world" },
      { role: "user", content: LONG }
    ],
    tools: [{ type: "function", function: { name: "f", parameters: {} } }]
  }
  const tools = JSON.stringify(body.tools)
  const approx = Math.ceil(14 / 4) + Math.ceil(11 / 4) + Math.ceil(LONG.length / 4) + Math.ceil(tools.length / 4)

  it("approximates with characters / 4 before the tokenizer is loaded, then counts with o200k", async () => {
    // Fresh copies of the modules: another file run in the same worker may have loaded the tokenizer.
    vi.resetModules()
    const { approximateTokens, estimateTokens, estimateTokensSync, loadTokenizer, tokenizerLoaded } = await import(
      "../src/services/context/estimate.js"
    )
    const { countTextTokens } = await import("../src/upstream/formats/tokens.js")
    expect(tokenizerLoaded()).toBe(false)
    expect(estimateTokensSync("openai-chat", "chat.completions", body)).toBe(approx)
    await loadTokenizer()
    expect(tokenizerLoaded()).toBe(true)
    const exact = await countTextTokens(["You are terse.", "hello world", LONG, tools])
    expect(exact).toBeLessThan(approx - 20)
    expect(estimateTokensSync("openai-chat", "chat.completions", body)).toBe(exact)
    expect(await estimateTokens("openai-chat", "chat.completions", body)).toBe(exact)
    expect(
      await estimateTokens("openai-chat", "chat.completions", { model: "m", messages: [{ role: "user", content: "hello world" }] })
    ).toBe(2)
    // approximateTokens stays characters / 4 once the tokenizer is loaded.
    expect(approximateTokens("openai-chat", "chat.completions", body)).toBe(approx)
  })

  it("says which tokenizer counts a target family, honestly", () => {
    expect(tokenizerFamily("openai")).toEqual({ tokenizer: "o200k", exact: true, label: "o200k" })
    for (const p of ["anthropic", "gemini", "ollama", "openrouter", "deepseek"]) {
      expect(tokenizerFamily(p)).toEqual({ tokenizer: "o200k", exact: false, label: "approximate (o200k)" })
    }
  })
})
