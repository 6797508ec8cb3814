// When each block appeared, as an observer of the chain sees it: eth_blockNumber polled every few milliseconds, the
// first time a height is seen recorded (performance.now()). A settlement's block then tells when it was on chain.
import { rpcCall } from "./snapshot.js"

export class BlockWatch {
  private readonly seen = new Map<number, number>()
  private last = -1
  private running = true
  private readonly loop: Promise<void>

  private constructor(private readonly rpcUrl: string, private readonly intervalMs: number) {
    this.loop = this.run()
  }

  /** Starts polling at once; `stop()` must be called (onCleanup). */
  static start(rpcUrl: string, intervalMs = 20) {
    return new BlockWatch(rpcUrl, intervalMs)
  }

  private async run() {
    while (this.running) {
      const at = performance.now()
      try {
        const height = Number(BigInt(String(await rpcCall(this.rpcUrl, "eth_blockNumber"))))
        const now = performance.now()
        // Heights skipped between two polls (automine under load) all count as seen now.
        for (let h = this.last + 1; h <= height; h++) if (!this.seen.has(h)) this.seen.set(h, this.last < 0 ? at : now)
        this.last = Math.max(this.last, height)
      } catch {
        // the node is going away (end of a phase): the next poll or stop() decides
      }
      await new Promise((r) => setTimeout(r, this.intervalMs))
    }
  }

  /** performance.now() when block `height` was first seen, if it was. */
  seenAt(height: number): number | undefined {
    return this.seen.get(height)
  }

  /** The highest block seen at or before `time` (performance.now()). */
  heightAt(time: number): number {
    let best = -1
    for (const [h, t] of this.seen) if (t <= time && h > best) best = h
    return best
  }

  get height() {
    return this.last
  }

  async stop() {
    this.running = false
    await this.loop
  }
}

/** The block each transaction was mined in (receipts read after the run). */
export const blocksOf = async (rpcUrl: string, hashes: Iterable<string>): Promise<Map<string, number>> => {
  const out = new Map<string, number>()
  for (const hash of hashes) {
    const receipt = await rpcCall(rpcUrl, "eth_getTransactionReceipt", [hash])
    const block = typeof receipt === "object" && receipt !== null && "blockNumber" in receipt ? receipt.blockNumber : undefined
    if (typeof block === "string") out.set(hash, Number(BigInt(block)))
  }
  return out
}
