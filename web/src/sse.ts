/**
 * Reads a response body of server-sent events: `onEvent` gets each event's name ("message" when
 * it has none) and its data (the data lines joined by "\n"); events without data are skipped.
 */
export const readSse = async (body: ReadableStream<Uint8Array>, onEvent: (event: string, data: string) => void): Promise<void> => {
  const reader = body.getReader()
  const decoder = new TextDecoder()
  let buffer = ""
  for (;;) {
    const { value, done } = await reader.read()
    if (done) break
    buffer += decoder.decode(value, { stream: true })
    let cut: number
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut)
      buffer = buffer.slice(cut + 2)
      let event = "message"
      const data: Array<string> = []
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim()
        else if (line.startsWith("data:")) data.push(line.slice(line[5] === " " ? 6 : 5))
      }
      if (data.length > 0) onEvent(event, data.join("\n"))
    }
  }
}
