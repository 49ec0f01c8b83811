// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import { ServerConnection } from '@jupyterlab/services';
import type { IDisposable } from '@lumino/disposable';
import { Poll } from '@lumino/polling';
import type { ISignal } from '@lumino/signaling';
import { Signal } from '@lumino/signaling';

import { EXTENSION_ID } from '../tokens';
import type { IAgentModel } from './api';
import { listAgents } from './api';

/**
 * The agents of the current user, as the server last listed them: the one
 * poller of the page (every ~2 s while it is visible), which the approval
 * notifications, the control status item and the dialogs all follow.
 *
 * A failed listing makes the poll back off (up to 5 minutes between tries)
 * and keeps the last list; a server without agent routes (404: an older
 * server, or the operator turned agents off) stops it.
 */
export class AgentsModel implements IDisposable {
  /**
   * Construct the model.
   *
   * @param options - The server settings and the poll's timing.
   */
  constructor(options: AgentsModel.IOptions) {
    this.serverSettings = options.serverSettings;
    this._poll = new Poll({
      auto: options.auto ?? true,
      factory: () => this._fetch(),
      frequency: {
        interval: options.interval ?? 2000,
        backoff: true,
        max: 300_000
      },
      name: `${EXTENSION_ID}:agents`,
      standby: 'when-hidden'
    });
  }

  /**
   * The tool terminals' server settings the agents are listed with.
   */
  readonly serverSettings: ServerConnection.ISettings;

  /**
   * A signal emitted when the list changed, or the server turned out to
   * have no agent routes.
   */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /**
   * The agents last listed.
   */
  get agents(): ReadonlyArray<IAgentModel> {
    return this._agents;
  }

  /**
   * Whether the server has no agent routes (the poll stopped).
   */
  get unavailable(): boolean {
    return this._unavailable;
  }

  /**
   * Whether the model is disposed.
   */
  get isDisposed(): boolean {
    return this._poll.isDisposed;
  }

  /**
   * An agent by id, if listed.
   *
   * @param id - The agent id.
   */
  get(id: string): IAgentModel | undefined {
    return this._agents.find(agent => agent.id === id);
  }

  /**
   * The agents holding control at `now` (ms since the epoch), the one whose
   * control ends first first.
   *
   * @param now - The time to judge by (default: now).
   */
  controlling(now: number = Date.now()): IAgentModel[] {
    return this._agents
      .filter(agent => controlEnd(agent) > now)
      .sort((a, b) => controlEnd(a) - controlEnd(b));
  }

  /**
   * List the agents now (after the user acted: the notification, the status
   * item and the dialogs show the result at once).
   *
   * @returns A promise that resolves once the list is current; it rejects
   *   with the server's error when the listing failed.
   */
  async refresh(): Promise<void> {
    await this._fetch();
  }

  /**
   * Stop polling.
   */
  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._poll.dispose();
    Signal.clearData(this);
  }

  /**
   * List the agents; a failure rejects (the poll backs off).
   */
  private async _fetch(): Promise<void> {
    let agents: IAgentModel[];
    try {
      agents = await listAgents(this.serverSettings);
    } catch (error) {
      if (
        error instanceof ServerConnection.ResponseError &&
        error.response.status === 404 &&
        !this._unavailable
      ) {
        this._unavailable = true;
        void this._poll.stop();
        this._changed.emit();
      }
      throw error;
    }
    this._unavailable = false;
    if (JSON.stringify(agents) !== JSON.stringify(this._agents)) {
      this._agents = agents;
      if (!this.isDisposed) {
        this._changed.emit();
      }
    }
  }

  private _poll: Poll;
  private _agents: IAgentModel[] = [];
  private _unavailable = false;
  private _changed = new Signal<this, void>(this);
}

/**
 * The namespace for `AgentsModel` statics.
 */
export namespace AgentsModel {
  /**
   * The options of the model.
   */
  export interface IOptions {
    /**
     * The tool terminals' server settings.
     */
    serverSettings: ServerConnection.ISettings;

    /**
     * How often the list is asked for while the page is visible (ms,
     * default 2 s).
     */
    interval?: number;

    /**
     * Whether to start polling at once (default `true`).
     */
    auto?: boolean;
  }
}

/**
 * When an agent's control ends (ms since the epoch), 0 when it has none.
 *
 * @param agent - An agent.
 */
export function controlEnd(agent: IAgentModel): number {
  if (agent.control_until === null) {
    return 0;
  }
  const end = Date.parse(agent.control_until);
  return Number.isNaN(end) ? 0 : end;
}
