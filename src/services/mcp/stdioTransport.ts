/**
 * The SDK's `Transport` over a stdio server the gateway spawned itself (processes.ts): newline-
 * delimited JSON-RPC on its stdin and stdout, as the SDK's StdioClientTransport speaks it. Ours
 * because the supervisor needs what that one hides: the process group, the exit code and signal,
 * the pid recorded before the first message. Loaded with the SDK (connection.ts), never before.
 */
import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import { type StdioProcess, stopStdioServer } from "./processes.js"

export class ProcessTransport implements Transport {
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: <T extends JSONRPCMessage>(message: T) => void
  private readonly buffer = new ReadBuffer()
  private started = false
  private closed = false

  constructor(readonly child: StdioProcess) {}

  async start(): Promise<void> {
    if (this.started) throw new Error("ProcessTransport already started")
    this.started = true
    const { proc } = this.child
    if (this.child.end() !== undefined) throw new Error("the process has exited")
    proc.stdout?.on("data", (chunk: Buffer) => {
      try {
        this.buffer.append(chunk)
      } catch (e) {
        // More than the buffer's limit without a newline: not a protocol stream.
        this.onerror?.(e as Error)
        void this.close()
        return
      }
      for (;;) {
        let message: JSONRPCMessage | null
        try {
          message = this.buffer.readMessage()
        } catch (e) {
          // A line that is not JSON-RPC (a server logging to stdout): reported, skipped.
          this.onerror?.(e as Error)
          continue
        }
        if (message === null) break
        this.onmessage?.(message)
      }
    })
    proc.stdout?.on("error", (e) => this.onerror?.(e))
    proc.stdin?.on("error", (e) => this.onerror?.(e))
    proc.once("close", () => this.closedNow())
  }

  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve, reject) => {
      const stdin = this.child.proc.stdin
      if (this.closed || stdin === null || stdin.destroyed || !stdin.writable) return reject(new Error("Not connected"))
      if (stdin.write(serializeMessage(message))) resolve()
      else stdin.once("drain", resolve)
    })
  }

  async close(): Promise<void> {
    await stopStdioServer(this.child)
    this.closedNow()
  }

  private closedNow() {
    if (this.closed) return
    this.closed = true
    this.buffer.clear()
    this.onclose?.()
  }
}
