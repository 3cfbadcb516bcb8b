import type { Recorded, Reply } from "../support/fakeUpstream.js"

/**
 * A model stand-in for coding agents, in whatever family the request arrives: it calls the
 * agent's shell tool when the user asks USE_TOOL, answers with the tool's result once it comes
 * back, and says hello otherwise.
 */
export const HELLO = "hello from the fake upstream"
export const SEEN = "TOOL_RESULT_SEEN:"

interface Inspected {
  readonly userText: string
  readonly toolResult: string | undefined
  readonly tools: ReadonlyArray<{ readonly name: string; readonly schema: any }>
}

const text = (v: unknown): string =>
  typeof v === "string"
    ? v
    : Array.isArray(v)
      ? v.map((p: any) => (typeof p === "string" ? p : (p?.text ?? p?.output ?? ""))).join("\n")
      : ""

const inspect = (r: Recorded): Inspected => {
  const b = r.body ?? {}
  switch (r.family) {
    case "openai-chat":
    case "ollama": {
      const messages: Array<any> = b.messages ?? []
      const last = messages[messages.length - 1]
      const user = [...messages].reverse().find((m) => m.role === "user")
      return {
        userText: text(user?.content),
        toolResult: last?.role === "tool" ? text(last.content) : undefined,
        tools: (b.tools ?? []).map((t: any) => ({ name: t.function?.name, schema: t.function?.parameters }))
      }
    }
    case "openai-responses": {
      const input: Array<any> = typeof b.input === "string" ? [{ role: "user", content: b.input }] : (b.input ?? [])
      const last = input[input.length - 1]
      const user = [...input].reverse().find((i) => (i.type ?? "message") === "message" && i.role === "user")
      return {
        userText: text(user?.content),
        toolResult: last?.type === "function_call_output" ? text(last.output) : undefined,
        tools: (b.tools ?? []).filter((t: any) => t.type === "function").map((t: any) => ({ name: t.name, schema: t.parameters }))
      }
    }
    case "anthropic": {
      const messages: Array<any> = b.messages ?? []
      const last = messages[messages.length - 1]
      const results = Array.isArray(last?.content) ? last.content.filter((c: any) => c.type === "tool_result") : []
      const user = [...messages]
        .reverse()
        .find((m) => m.role === "user" && (typeof m.content === "string" || m.content.some((c: any) => c.type === "text")))
      return {
        userText: text(typeof user?.content === "string" ? user.content : user?.content.filter((c: any) => c.type === "text")),
        toolResult: results.length ? text(typeof results[0].content === "string" ? results[0].content : results[0].content) : undefined,
        tools: (b.tools ?? []).map((t: any) => ({ name: t.name, schema: t.input_schema }))
      }
    }
    case "gemini": {
      const contents: Array<any> = b.contents ?? []
      const last = contents[contents.length - 1]
      const response = last?.role === "user" ? last.parts?.find((p: any) => p.functionResponse) : undefined
      const user = [...contents].reverse().find((c) => c.role === "user" && c.parts?.some((p: any) => typeof p.text === "string"))
      return {
        userText: text(user?.parts),
        toolResult: response ? JSON.stringify(response.functionResponse.response) : undefined,
        tools: (b.tools ?? []).flatMap((t: any) =>
          (t.functionDeclarations ?? []).map((d: any) => ({ name: d.name, schema: d.parameters ?? d.parametersJsonSchema }))
        )
      }
    }
    default:
      return { userText: "", toolResult: undefined, tools: [] }
  }
}

const SHELL = ["exec_command", "shell", "shell_command", "Bash", "bash", "run_shell_command"]

/** Arguments for a shell tool from its schema: the command property gets `echo TOOL_OK`. */
const shellArguments = (schema: any): Record<string, unknown> => {
  const props: Record<string, any> = schema?.properties ?? {}
  const commandKey = ["command", "cmd"].find((k) => k in props) ?? "command"
  const args: Record<string, unknown> = { [commandKey]: "echo TOOL_OK" }
  for (const key of schema?.required ?? []) if (!(key in args) && (props[key]?.type ?? "string") === "string") args[key] = "print TOOL_OK"
  return args
}

export const agentResponder = (r: Recorded): Reply => {
  const seen = inspect(r)
  if (seen.toolResult !== undefined) return { content: `${SEEN} ${seen.toolResult.replace(/\s+/g, " ").slice(0, 240)}` }
  if (seen.userText.includes("USE_TOOL")) {
    const shell = SHELL.map((n) => seen.tools.find((t) => t.name === n)).find((t) => t !== undefined)
    if (shell) return { toolCalls: [{ name: shell.name, arguments: JSON.stringify(shellArguments(shell.schema)) }] }
  }
  return { content: HELLO }
}
