// The trivial agent: POST anything → 200 {"echo": <input>} (the `input` field of the body, else the whole body).
import * as http from "node:http"

export interface EchoAgent {
  readonly port: number
  readonly close: () => Promise<void>
}

export const startEchoAgent = (): Promise<EchoAgent> => {
  const server = http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      let input: unknown = null
      try {
        const body: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"))
        input = typeof body === "object" && body !== null && "input" in body ? body.input : body
      } catch {
        input = null
      }
      const text = JSON.stringify({ echo: input })
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
      res.end(text)
    })
  })
  server.keepAliveTimeout = 60_000
  return new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      resolve({
        port: typeof address === "object" && address !== null ? address.port : 0,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections()
            server.close(() => done())
          })
      })
    })
  })
}
