// Reading undici response bodies within a byte cap, and dropping bodies we gave up on.
export type BodyStream = AsyncIterable<unknown> & {
  destroy: (error?: Error) => unknown
  on: (event: "error", listener: (error: Error) => void) => unknown
}

/** Drops a body we gave up on. undici reports the abort we cause as an 'error' event; it is expected (its own dump() ignores it too). */
export const abandon = (body: BodyStream) => {
  body.on("error", () => undefined)
  body.destroy()
}

/** Reads at most `limit` bytes; past that the stream is destroyed (the connection is dropped, nothing more is buffered). */
export const readCapped = async (body: BodyStream, limit: number): Promise<{ readonly bytes: Buffer; readonly truncated: boolean }> => {
  const chunks: Array<Uint8Array> = []
  let size = 0
  for await (const chunk of body) {
    if (!(chunk instanceof Uint8Array)) continue
    if (size + chunk.length > limit) {
      chunks.push(chunk.subarray(0, limit - size))
      abandon(body)
      return { bytes: Buffer.concat(chunks), truncated: true }
    }
    chunks.push(chunk)
    size += chunk.length
  }
  return { bytes: Buffer.concat(chunks, size), truncated: false }
}
