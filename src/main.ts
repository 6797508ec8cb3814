// Entry point: configuration from the environment, then the whole service until SIGINT/SIGTERM.
import { NodeRuntime } from "@effect/platform-node"
import { Layer } from "effect"
import { ConfigLive } from "../layers/Config.js"
import { AppLive } from "./App.js"

Layer.launch(AppLive.pipe(Layer.provide(ConfigLive))).pipe(NodeRuntime.runMain)
