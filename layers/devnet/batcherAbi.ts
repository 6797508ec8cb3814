/**
 * Hand-written ABI of contracts/SettlementBatcher.sol (the parts we call and read), as a `const` literal so viem infers
 * argument and event types; test/unit/settlementBatcherArtifact.test.ts checks it against solc's ABI.
 */
export const settlementBatcherAbi = [
  {
    type: "function",
    name: "settle",
    stateMutability: "nonpayable",
    inputs: [
      { name: "token", type: "address", internalType: "address" },
      {
        name: "items",
        type: "tuple[]",
        internalType: "struct SettlementBatcher.Authorization[]",
        components: [
          { name: "from", type: "address", internalType: "address" },
          { name: "to", type: "address", internalType: "address" },
          { name: "value", type: "uint256", internalType: "uint256" },
          { name: "validAfter", type: "uint256", internalType: "uint256" },
          { name: "validBefore", type: "uint256", internalType: "uint256" },
          { name: "nonce", type: "bytes32", internalType: "bytes32" },
          { name: "v", type: "uint8", internalType: "uint8" },
          { name: "r", type: "bytes32", internalType: "bytes32" },
          { name: "s", type: "bytes32", internalType: "bytes32" },
        ],
      },
    ],
    outputs: [{ name: "settled", type: "uint256", internalType: "uint256" }],
  },
  {
    type: "function",
    name: "ITEM_GAS",
    stateMutability: "view",
    inputs: [],
    outputs: [{ name: "", type: "uint256", internalType: "uint256" }],
  },
  {
    type: "event",
    name: "AuthorizationSettled",
    anonymous: false,
    inputs: [
      { name: "token", type: "address", indexed: true, internalType: "address" },
      { name: "from", type: "address", indexed: true, internalType: "address" },
      { name: "nonce", type: "bytes32", indexed: true, internalType: "bytes32" },
      { name: "index", type: "uint256", indexed: false, internalType: "uint256" },
      { name: "ok", type: "bool", indexed: false, internalType: "bool" },
    ],
  },
] as const;
