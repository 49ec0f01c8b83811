// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import { Notification, showErrorMessage } from '@jupyterlab/apputils';
import type { TranslationBundle } from '@jupyterlab/translation';
import type { IDisposable } from '@lumino/disposable';

import type { IAgentModel, IControlRequest } from './api';
import { endControl, grantControl } from './api';
import type { AgentsModel } from './model';

/**
 * How many minutes *Allow* gives when the request does not say.
 */
export const DEFAULT_CONTROL_MINUTES = 10;

/**
 * The owner's side of `request_control`: one JupyterLab notification per
 * pending request of an agent (keyed by the request's `created`), naming
 * the agent and its reason, with *Allow for N minutes* and *Deny*. The
 * approval is only here, in the owner's page: nothing the agent can reach
 * grants control.
 *
 * A request answered elsewhere (another tab, the REST routes) or withdrawn
 * (the agent was deleted) takes its notification away.
 */
export class ApprovalNotifier implements IDisposable {
  /**
   * Follow a model's agents.
   *
   * @param options - The agents model and the translation bundle.
   */
  constructor(options: ApprovalNotifier.IOptions) {
    this._model = options.model;
    this._trans = options.trans;
    this._model.changed.connect(this._update, this);
    this._update();
  }

  /**
   * Whether the notifier is disposed.
   */
  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /**
   * The notification ids shown, by request key.
   */
  get shown(): ReadonlyMap<string, string> {
    return this._shown;
  }

  /**
   * Stop following the model and take the notifications away.
   */
  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._model.changed.disconnect(this._update, this);
    for (const id of this._shown.values()) {
      Notification.dismiss(id);
    }
    this._shown.clear();
  }

  /**
   * Show the new requests, take away those no longer pending.
   */
  private _update(): void {
    const pending = new Map<string, IAgentModel>();
    for (const agent of this._model.agents) {
      if (agent.request !== null) {
        pending.set(requestKey(agent, agent.request), agent);
      }
    }
    for (const [key, id] of Array.from(this._shown)) {
      if (!pending.has(key)) {
        Notification.dismiss(id);
        this._shown.delete(key);
      }
    }
    for (const key of Array.from(this._answered)) {
      if (!pending.has(key)) {
        this._answered.delete(key);
      }
    }
    for (const [key, agent] of pending) {
      if (!this._shown.has(key) && !this._answered.has(key)) {
        this._shown.set(key, this._notify(key, agent, agent.request!));
      }
    }
  }

  /**
   * Show one request.
   */
  private _notify(
    key: string,
    agent: IAgentModel,
    request: IControlRequest
  ): string {
    const trans = this._trans;
    const minutes = requestedMinutes(request);
    const message = request.reason.trim()
      ? trans.__(
          'Agent "%1" asks to control your tool terminals for %2 minutes: %3',
          agent.name,
          minutes,
          request.reason.trim()
        )
      : trans.__(
          'Agent "%1" asks to control your tool terminals for %2 minutes.',
          agent.name,
          minutes
        );
    return Notification.warning(message, {
      autoClose: false,
      actions: [
        {
          label: trans.__('Allow for %1 minutes', minutes),
          caption: trans.__(
            'Let the agent open terminals and type in them until then'
          ),
          displayType: 'accent',
          callback: () => {
            void this._answer(key, () =>
              grantControl(agent.id, minutes, this._model.serverSettings)
            );
          }
        },
        {
          label: trans.__('Deny'),
          caption: trans.__('The agent stays read-only'),
          callback: () => {
            void this._answer(key, () =>
              endControl(agent.id, this._model.serverSettings)
            );
          }
        }
      ]
    });
  }

  /**
   * Send the owner's answer; the list follows at once. The toast is gone
   * (an action closes it): a failure is shown in a dialog, and the request,
   * still pending, may be notified again.
   */
  private async _answer(key: string, send: () => Promise<unknown>) {
    this._answered.add(key);
    this._shown.delete(key);
    try {
      await send();
    } catch (error) {
      this._answered.delete(key);
      await showErrorMessage(
        this._trans.__('Could not answer the agent'),
        error as Error
      );
    }
    await this._model.refresh().catch(() => undefined);
  }

  private _model: AgentsModel;
  private _trans: TranslationBundle;
  private _shown = new Map<string, string>();
  // Requests answered here: the list may still show them until it is asked
  // again, and they must not pop up a second time.
  private _answered = new Set<string>();
  private _isDisposed = false;
}

/**
 * The namespace for `ApprovalNotifier` statics.
 */
export namespace ApprovalNotifier {
  /**
   * The options of the notifier.
   */
  export interface IOptions {
    /**
     * The agents model (the page's one poller).
     */
    model: AgentsModel;

    /**
     * The translation bundle.
     */
    trans: TranslationBundle;
  }
}

/**
 * What identifies one request of one agent.
 *
 * @param agent - The agent.
 * @param request - Its pending request.
 */
export function requestKey(
  agent: IAgentModel,
  request: IControlRequest
): string {
  return `${agent.id} ${request.created}`;
}

/**
 * The minutes *Allow* gives: what the agent asked for (a positive whole
 * number), else {@link DEFAULT_CONTROL_MINUTES}.
 *
 * @param request - The pending request.
 */
export function requestedMinutes(request: IControlRequest): number {
  const minutes = request.minutes;
  return typeof minutes === 'number' && Number.isFinite(minutes) && minutes > 0
    ? Math.ceil(minutes)
    : DEFAULT_CONTROL_MINUTES;
}
