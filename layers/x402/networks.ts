// Network names: x402 v1 names some EVM chains, the others we name ourselves (offered to x402 v2 payers by CAIP-2 id only).

/** x402 v1 names its networks; these are the EVM ones it knows, by chain id. */
export const X402_NETWORKS: Record<number, string> = {
  84532: "base-sepolia",
  8453: "base",
  43113: "avalanche-fuji",
  43114: "avalanche",
  137: "polygon",
  80002: "polygon-amoy",
  4689: "iotex",
  1329: "sei",
  1328: "sei-testnet"
}

/**
 * Networks x402 v1 has no name for (x402 1.2's `NetworkSchema`): we name them ourselves. They are offered to x402 v2
 * payers only (CAIP-2 `eip155:<id>`): a v1 client parses every `accepts` entry and fails on a name it does not know
 * (docs/decisions/networks.md).
 */
export const OTHER_NETWORKS: Record<number, string> = {
  1: "ethereum",
  11155111: "sepolia"
}

/** Whether x402 v1 clients know this network name (else it is offered in x402 v2 challenges only). */
export const isX402V1Network = (network: string) => Object.values(X402_NETWORKS).includes(network)
