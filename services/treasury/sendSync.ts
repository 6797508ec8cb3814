// eth_sendRawTransactionSync (EIP-7966): a node that has it answers the send with the transaction's receipt, saving the
// receipt round trip and its poll. Nodes without it answer JSON-RPC "method not found" (-32601), or, on some
// providers, a message saying so: then the writer stops asking (networkWriter.ts `broadcastFirst`).

/** Whether a failed call's error (viem's, with its causes) says the node does not have the method. */
export const methodMissing = (error: unknown): boolean => {
  for (let e: unknown = error, depth = 0; e !== undefined && e !== null && depth < 6; depth++) {
    if (typeof e === "object" && "code" in e && e.code === -32601) return true
    e = typeof e === "object" && "cause" in e ? e.cause : undefined
  }
  return /method not found|method .* does not exist|method .* is not available|unsupported method/i.test(String(error))
}
