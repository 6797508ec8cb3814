// USDC amounts: 6-decimal strings on the wire ("0.010000"), bigint micro-USDC in code.

/** "1.5" → 1500000n (`toMicro(balance.available) >= toMicro("1.00")`). Throws on anything that is not a non-negative decimal with at most 6 decimals. */
export const toMicro = (usdc: string): bigint => {
  const match = /^(\d{1,12})(?:\.(\d{1,6}))?$/.exec(usdc.trim())
  if (match === null) throw new RangeError(`not a USDC amount with at most 6 decimals: ${JSON.stringify(usdc)}`)
  return BigInt(match[1] ?? "0") * 1_000_000n + BigInt((match[2] ?? "").padEnd(6, "0"))
}

/** 1500000n → "1.500000". */
export const fromMicro = (micro: bigint): string => {
  const sign = micro < 0n ? "-" : ""
  const abs = micro < 0n ? -micro : micro
  return `${sign}${abs / 1_000_000n}.${(abs % 1_000_000n).toString().padStart(6, "0")}`
}
