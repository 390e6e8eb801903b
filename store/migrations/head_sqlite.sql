-- revision: 0025
CREATE TABLE alembic_version (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
);
CREATE TABLE agent (
	id INTEGER NOT NULL, 
	name VARCHAR NOT NULL, 
	kind VARCHAR NOT NULL, 
	created_at DATETIME NOT NULL, 
	CONSTRAINT pk_agent PRIMARY KEY (id), 
	CONSTRAINT uq_agent_name UNIQUE (name)
);
CREATE TABLE bar (
	symbol VARCHAR NOT NULL, 
	interval VARCHAR NOT NULL, 
	start_at DATETIME NOT NULL, 
	end_at DATETIME NOT NULL, 
	open TEXT NOT NULL, 
	high TEXT NOT NULL, 
	low TEXT NOT NULL, 
	close TEXT NOT NULL, 
	volume TEXT NOT NULL, 
	source VARCHAR NOT NULL, 
	fetched_at DATETIME NOT NULL, 
	is_final BOOLEAN NOT NULL, known_at DATETIME, 
	CONSTRAINT pk_bar PRIMARY KEY (symbol, interval, start_at)
);
CREATE TABLE account (
	id INTEGER NOT NULL, 
	agent_id INTEGER NOT NULL, 
	market VARCHAR NOT NULL, 
	currency VARCHAR NOT NULL, 
	initial_cash TEXT NOT NULL, 
	cash TEXT NOT NULL, 
	paused BOOLEAN NOT NULL, 
	created_at DATETIME NOT NULL, allow_short BOOLEAN DEFAULT 0 NOT NULL, 
	CONSTRAINT pk_account PRIMARY KEY (id), 
	CONSTRAINT ck_account_market CHECK (market IN ('us', 'cn', 'crypto')), 
	CONSTRAINT fk_account_agent_id_agent FOREIGN KEY(agent_id) REFERENCES agent (id), 
	CONSTRAINT uq_account_agent_id_market UNIQUE (agent_id, market)
);
CREATE TABLE cycle (
	id INTEGER NOT NULL, 
	account_id INTEGER NOT NULL, 
	slot_at DATETIME NOT NULL, 
	status VARCHAR NOT NULL, 
	claimed_by VARCHAR NOT NULL, 
	lease_until DATETIME NOT NULL, 
	started_at DATETIME NOT NULL, 
	finished_at DATETIME, 
	error_class VARCHAR, 
	error_message TEXT, 
	reason TEXT, tokens_in INTEGER, tokens_out INTEGER, tokens_cached INTEGER, usage_estimated BOOLEAN, llm_latency_ms INTEGER, cost TEXT, parse_failures INTEGER, invalid_tool_calls INTEGER, llm_attempts INTEGER, llm_failed_attempts INTEGER, 
	CONSTRAINT pk_cycle PRIMARY KEY (id), 
	CONSTRAINT ck_cycle_status CHECK (status IN ('claimed', 'done', 'failed', 'skipped', 'interrupted', 'missed')), 
	CONSTRAINT fk_cycle_account_id_account FOREIGN KEY(account_id) REFERENCES account (id), 
	CONSTRAINT uq_cycle_account_id_slot_at UNIQUE (account_id, slot_at)
);
CREATE TABLE nav_snapshot (
	id INTEGER NOT NULL, 
	account_id INTEGER NOT NULL, 
	at DATETIME NOT NULL, 
	kind VARCHAR NOT NULL, 
	cash TEXT NOT NULL, 
	positions_value TEXT NOT NULL, 
	nav TEXT NOT NULL, 
	last_fill_id INTEGER, last_action_id INTEGER, 
	CONSTRAINT pk_nav_snapshot PRIMARY KEY (id), 
	CONSTRAINT ck_nav_snapshot_kind CHECK (kind IN ('slot', 'close')), 
	CONSTRAINT fk_nav_snapshot_account_id_account FOREIGN KEY(account_id) REFERENCES account (id), 
	CONSTRAINT uq_nav_snapshot_account_id_at_kind UNIQUE (account_id, at, kind)
);
CREATE TABLE position (
	account_id INTEGER NOT NULL, 
	symbol VARCHAR NOT NULL, 
	quantity TEXT NOT NULL, 
	cost TEXT NOT NULL, 
	updated_at DATETIME NOT NULL, 
	CONSTRAINT pk_position PRIMARY KEY (account_id, symbol), 
	CONSTRAINT fk_position_account_id_account FOREIGN KEY(account_id) REFERENCES account (id)
);
CREATE TABLE nav_mark (
	snapshot_id INTEGER NOT NULL, 
	symbol VARCHAR NOT NULL, 
	quantity TEXT NOT NULL, 
	price TEXT NOT NULL, 
	value TEXT NOT NULL, 
	CONSTRAINT pk_nav_mark PRIMARY KEY (snapshot_id, symbol), 
	CONSTRAINT fk_nav_mark_snapshot_id_nav_snapshot FOREIGN KEY(snapshot_id) REFERENCES nav_snapshot (id)
);
CREATE TABLE trace (
	id INTEGER NOT NULL, 
	cycle_id INTEGER NOT NULL, 
	seq INTEGER NOT NULL, 
	role VARCHAR NOT NULL, 
	content TEXT, 
	tool VARCHAR, 
	arguments TEXT, 
	result TEXT, 
	tokens_in INTEGER, 
	tokens_out INTEGER, 
	latency_ms INTEGER, 
	at DATETIME NOT NULL, model VARCHAR, fingerprint VARCHAR, revision VARCHAR, request_digest VARCHAR, response TEXT, 
	CONSTRAINT pk_trace PRIMARY KEY (id), 
	CONSTRAINT fk_trace_cycle_id_cycle FOREIGN KEY(cycle_id) REFERENCES cycle (id), 
	CONSTRAINT uq_trace_cycle_id_seq UNIQUE (cycle_id, seq)
);
CREATE TABLE "news" (
	id INTEGER NOT NULL, 
	symbol VARCHAR, 
	published_at DATETIME NOT NULL, 
	title TEXT NOT NULL, 
	url TEXT, 
	source VARCHAR NOT NULL, 
	fetched_at DATETIME NOT NULL, 
	item_key VARCHAR NOT NULL, 
	item_source VARCHAR NOT NULL, known_at DATETIME, 
	CONSTRAINT pk_news PRIMARY KEY (id), 
	CONSTRAINT uq_news_item_key UNIQUE (item_key)
);
CREATE INDEX ix_news_symbol_published_at ON news (symbol, published_at);
CREATE TABLE bar_coverage (
	id INTEGER NOT NULL, 
	source VARCHAR NOT NULL, 
	symbol VARCHAR NOT NULL, 
	interval VARCHAR NOT NULL, 
	start_at DATETIME NOT NULL, 
	end_at DATETIME NOT NULL, 
	fetched_at DATETIME NOT NULL, 
	CONSTRAINT pk_bar_coverage PRIMARY KEY (id), 
	CONSTRAINT ck_bar_coverage_span CHECK (start_at < end_at)
);
CREATE INDEX ix_bar_coverage_source_symbol_interval ON bar_coverage (source, symbol, interval, start_at);
CREATE TABLE corporate_action (
	id INTEGER NOT NULL, 
	account_id INTEGER NOT NULL, 
	symbol VARCHAR NOT NULL, 
	kind VARCHAR NOT NULL, 
	ex_date DATE NOT NULL, 
	ex_at DATETIME NOT NULL, 
	ratio TEXT NOT NULL, 
	cash_per_share TEXT NOT NULL, 
	currency VARCHAR NOT NULL, 
	source VARCHAR NOT NULL, 
	quantity_before TEXT NOT NULL, 
	quantity_delta TEXT NOT NULL, 
	fraction TEXT NOT NULL, 
	price TEXT, 
	cash_delta TEXT NOT NULL, 
	cost_delta TEXT NOT NULL, 
	after_fill_id INTEGER, 
	applied_at DATETIME NOT NULL, 
	CONSTRAINT pk_corporate_action PRIMARY KEY (id), 
	CONSTRAINT ck_corporate_action_kind CHECK (kind IN ('cash_dividend', 'split')), 
	CONSTRAINT fk_corporate_action_account_id_account FOREIGN KEY(account_id) REFERENCES account (id), 
	CONSTRAINT uq_corporate_action_account_id_symbol_kind_ex_date UNIQUE (account_id, symbol, kind, ex_date)
);
CREATE TABLE masking_key (
	account_id INTEGER NOT NULL, 
	epoch DATE NOT NULL, 
	money_unit TEXT NOT NULL, 
	CONSTRAINT pk_masking_key PRIMARY KEY (account_id), 
	CONSTRAINT fk_masking_key_account_id_account FOREIGN KEY(account_id) REFERENCES account (id)
);
CREATE TABLE masking_alias (
	account_id INTEGER NOT NULL, 
	symbol VARCHAR NOT NULL, 
	alias VARCHAR NOT NULL, 
	CONSTRAINT pk_masking_alias PRIMARY KEY (account_id, symbol), 
	CONSTRAINT fk_masking_alias_account_id_masking_key FOREIGN KEY(account_id) REFERENCES masking_key (account_id), 
	CONSTRAINT uq_masking_alias_account_id_alias UNIQUE (account_id, alias)
);
CREATE TABLE daemon_run (
	id INTEGER NOT NULL, 
	run_id VARCHAR NOT NULL, 
	market VARCHAR NOT NULL, 
	started_at DATETIME NOT NULL, 
	CONSTRAINT pk_daemon_run PRIMARY KEY (id), 
	CONSTRAINT ck_daemon_run_market CHECK (market IN ('us', 'cn', 'crypto')), 
	CONSTRAINT uq_daemon_run_run_id_market UNIQUE (run_id, market)
);
CREATE TABLE agent_token (
	id INTEGER NOT NULL, 
	agent_id INTEGER NOT NULL, 
	token_hash VARCHAR NOT NULL, 
	issued_at DATETIME NOT NULL, 
	revoked_at DATETIME, 
	CONSTRAINT pk_agent_token PRIMARY KEY (id), 
	CONSTRAINT fk_agent_token_agent_id_agent FOREIGN KEY(agent_id) REFERENCES agent (id), 
	CONSTRAINT uq_agent_token_token_hash UNIQUE (token_hash)
);
CREATE INDEX ix_agent_token_agent_id ON agent_token (agent_id);
CREATE VIEW v_latest_nav AS
SELECT agent.name AS agent, account.market, snapshot.account_id, snapshot.at, snapshot.nav,
       snapshot.cash, snapshot.positions_value
FROM (
    SELECT account_id, MAX(at) AS at FROM nav_snapshot WHERE kind = 'slot' GROUP BY account_id
) AS newest
JOIN nav_snapshot AS snapshot
    ON snapshot.account_id = newest.account_id AND snapshot.at = newest.at
    AND snapshot.kind = 'slot'
JOIN account ON account.id = snapshot.account_id
JOIN agent ON agent.id = account.agent_id;
CREATE VIEW v_account_returns AS
SELECT agent.name AS agent, account.market, returns.account_id, returns.at, returns.nav,
       returns.period_return, returns.cumulative_return, returns.drawdown
FROM (
    SELECT account_id, at, nav,
           value / LAG(value) OVER (PARTITION BY account_id ORDER BY at) - 1 AS period_return,
           value / FIRST_VALUE(value) OVER (PARTITION BY account_id ORDER BY at) - 1
               AS cumulative_return,
           value / MAX(value) OVER (
               PARTITION BY account_id ORDER BY at
               ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
           ) - 1 AS drawdown
    FROM (
    SELECT account_id, at, nav, value
    FROM (
        SELECT account_id, at, nav, CAST(nav AS DOUBLE PRECISION) AS value
        FROM nav_snapshot
        WHERE kind = 'slot'
    ) AS slot_navs
    WHERE value > 0
) AS series
) AS returns
JOIN account ON account.id = returns.account_id
JOIN agent ON agent.id = account.agent_id;
CREATE VIEW v_leaderboard AS
SELECT * FROM (
    SELECT agent.name AS agent, agent.kind, account.market, account.currency,
           account.id AS account_id, account.initial_cash,
           series.first_at, latest.at AS as_of, COALESCE(series.periods, 0) AS periods,
           latest.nav AS last_nav,
           CASE WHEN series.periods > 0 THEN
               CAST(last_snapshot.nav AS DOUBLE PRECISION)
               / CAST(first_snapshot.nav AS DOUBLE PRECISION) - 1
           END AS cumulative_return,
           CASE WHEN series.periods > 0 THEN series.max_drawdown END AS max_drawdown
    FROM account
    JOIN agent ON agent.id = account.agent_id
    LEFT JOIN v_latest_nav AS latest ON latest.account_id = account.id
    LEFT JOIN (
        SELECT account_id, MIN(at) AS first_at, MAX(at) AS last_at, COUNT(*) - 1 AS periods,
               MIN(drawdown) AS max_drawdown
        FROM (
            SELECT account_id, at,
                   value / MAX(value) OVER (
                       PARTITION BY account_id ORDER BY at
                       ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
                   ) - 1 AS drawdown
            FROM (
    SELECT account_id, at, nav, value
    FROM (
        SELECT account_id, at, nav, CAST(nav AS DOUBLE PRECISION) AS value
        FROM nav_snapshot
        WHERE kind = 'slot'
    ) AS slot_navs
    WHERE value > 0
) AS series
        ) AS drawdowns
        GROUP BY account_id
    ) AS series ON series.account_id = account.id
    LEFT JOIN nav_snapshot AS first_snapshot
        ON first_snapshot.account_id = account.id AND first_snapshot.at = series.first_at
        AND first_snapshot.kind = 'slot'
    LEFT JOIN nav_snapshot AS last_snapshot
        ON last_snapshot.account_id = account.id AND last_snapshot.at = series.last_at
        AND last_snapshot.kind = 'slot'
) AS board
ORDER BY market, cumulative_return IS NULL, cumulative_return DESC, agent;
CREATE TABLE fundamentals_report (
	id INTEGER NOT NULL, 
	symbol VARCHAR NOT NULL, 
	period_end DATE NOT NULL, 
	published_at DATETIME NOT NULL, 
	known_at DATETIME NOT NULL, 
	currency VARCHAR NOT NULL, 
	figures TEXT NOT NULL, 
	source VARCHAR NOT NULL, 
	fetched_at DATETIME NOT NULL, 
	item_key VARCHAR NOT NULL, 
	CONSTRAINT pk_fundamentals_report PRIMARY KEY (id), 
	CONSTRAINT uq_fundamentals_report_item_key UNIQUE (item_key)
);
CREATE INDEX ix_fundamentals_report_symbol_published_at ON fundamentals_report (symbol, published_at);
CREATE TABLE quote_record (
	id INTEGER NOT NULL, 
	source VARCHAR NOT NULL, 
	symbol VARCHAR NOT NULL, 
	asked_at DATETIME NOT NULL, 
	quoted_at DATETIME NOT NULL, 
	price TEXT NOT NULL, 
	fetched_at DATETIME NOT NULL, 
	CONSTRAINT pk_quote_record PRIMARY KEY (id), 
	CONSTRAINT uq_quote_record_source_symbol_asked_at UNIQUE (source, symbol, asked_at)
);
CREATE INDEX ix_quote_record_symbol_asked_at ON quote_record (symbol, asked_at);
CREATE TABLE replay_warning (
	id INTEGER NOT NULL, 
	market VARCHAR NOT NULL, 
	start_at DATETIME NOT NULL, 
	end_at DATETIME NOT NULL, 
	message TEXT NOT NULL, 
	CONSTRAINT pk_replay_warning PRIMARY KEY (id), 
	CONSTRAINT ck_replay_warning_market CHECK (market IN ('us', 'cn', 'crypto'))
);
CREATE TABLE seed_run (
	agent_id INTEGER NOT NULL, 
	group_label VARCHAR NOT NULL, 
	base_agent VARCHAR NOT NULL, 
	seed INTEGER NOT NULL, 
	CONSTRAINT pk_seed_run PRIMARY KEY (agent_id), 
	CONSTRAINT fk_seed_run_agent_id_agent FOREIGN KEY(agent_id) REFERENCES agent (id)
);
CREATE TABLE strategy_code (
	id INTEGER NOT NULL, 
	account_id INTEGER NOT NULL, 
	cycle_id INTEGER NOT NULL, 
	written_at DATETIME NOT NULL, 
	code TEXT NOT NULL, 
	claimed_return TEXT, 
	claimed_hit_rate TEXT, 
	rationale TEXT NOT NULL, 
	answers INTEGER NOT NULL, 
	CONSTRAINT pk_strategy_code PRIMARY KEY (id), 
	CONSTRAINT fk_strategy_code_account_id_account FOREIGN KEY(account_id) REFERENCES account (id), 
	CONSTRAINT fk_strategy_code_cycle_id_cycle FOREIGN KEY(cycle_id) REFERENCES cycle (id)
);
CREATE INDEX ix_strategy_code_account_id ON strategy_code (account_id);
CREATE TABLE strategy_run (
	id INTEGER NOT NULL, 
	strategy_id INTEGER NOT NULL, 
	cycle_id INTEGER NOT NULL, 
	ran_at DATETIME NOT NULL, 
	duration_ms INTEGER NOT NULL, 
	outcome VARCHAR NOT NULL, 
	weights TEXT, 
	error TEXT, offered TEXT, 
	CONSTRAINT pk_strategy_run PRIMARY KEY (id), 
	CONSTRAINT ck_strategy_run_outcome CHECK (outcome IN ('ok', 'error', 'invalid', 'timeout', 'killed')), 
	CONSTRAINT fk_strategy_run_cycle_id_cycle FOREIGN KEY(cycle_id) REFERENCES cycle (id), 
	CONSTRAINT fk_strategy_run_strategy_id_strategy_code FOREIGN KEY(strategy_id) REFERENCES strategy_code (id), 
	CONSTRAINT uq_strategy_run_cycle_id UNIQUE (cycle_id)
);
CREATE INDEX ix_strategy_run_strategy_id ON strategy_run (strategy_id);
CREATE TABLE "order" (
	id INTEGER NOT NULL, 
	cycle_id INTEGER NOT NULL, 
	account_id INTEGER NOT NULL, 
	seq INTEGER NOT NULL, 
	idempotency_key VARCHAR NOT NULL, 
	symbol VARCHAR NOT NULL, 
	side VARCHAR NOT NULL, 
	quantity TEXT NOT NULL, 
	target_weight TEXT, 
	reason TEXT NOT NULL, 
	confidence TEXT, 
	placed_at DATETIME NOT NULL, 
	status VARCHAR NOT NULL, 
	reject_reason VARCHAR, 
	reject_message TEXT, 
	rejected_at DATETIME, 
	CONSTRAINT pk_order PRIMARY KEY (id), 
	CONSTRAINT uq_order_idempotency_key UNIQUE (idempotency_key), 
	CONSTRAINT ck_order_reject_reason CHECK ((status = 'rejected') = (reject_reason IS NOT NULL)), 
	CONSTRAINT uq_order_cycle_id_seq UNIQUE (cycle_id, seq), 
	CONSTRAINT fk_order_cycle_id_cycle FOREIGN KEY(cycle_id) REFERENCES cycle (id), 
	CONSTRAINT ck_order_status CHECK (status IN ('filled', 'rejected')), 
	CONSTRAINT fk_order_account_id_account FOREIGN KEY(account_id) REFERENCES account (id), 
	CONSTRAINT ck_order_side CHECK (side IN ('buy', 'sell', 'short', 'cover'))
);
CREATE INDEX ix_order_account_id ON "order" (account_id);
CREATE TABLE "fill" (
	id INTEGER NOT NULL, 
	order_id INTEGER NOT NULL, 
	account_id INTEGER NOT NULL, 
	idempotency_key VARCHAR NOT NULL, 
	symbol VARCHAR NOT NULL, 
	side VARCHAR NOT NULL, 
	quantity TEXT NOT NULL, 
	price TEXT NOT NULL, 
	notional TEXT NOT NULL, 
	fees TEXT NOT NULL, 
	currency VARCHAR NOT NULL, 
	filled_at DATETIME NOT NULL, 
	price_source VARCHAR NOT NULL, 
	CONSTRAINT pk_fill PRIMARY KEY (id), 
	CONSTRAINT fk_fill_account_id_account FOREIGN KEY(account_id) REFERENCES account (id), 
	CONSTRAINT uq_fill_idempotency_key UNIQUE (idempotency_key), 
	CONSTRAINT fk_fill_order_id_order FOREIGN KEY(order_id) REFERENCES "order" (id), 
	CONSTRAINT ck_fill_side CHECK (side IN ('buy', 'sell', 'short', 'cover'))
);
CREATE INDEX ix_fill_order_id ON fill (order_id);
CREATE INDEX ix_fill_account_id_filled_at ON fill (account_id, filled_at);
CREATE TABLE borrow_fee (
	id INTEGER NOT NULL, 
	account_id INTEGER NOT NULL, 
	symbol VARCHAR NOT NULL, 
	day DATE NOT NULL, 
	quantity TEXT NOT NULL, 
	price TEXT NOT NULL, 
	rate_bps TEXT NOT NULL, 
	day_count INTEGER NOT NULL, 
	amount TEXT NOT NULL, 
	currency VARCHAR NOT NULL, 
	after_fill_id INTEGER, 
	charged_at DATETIME NOT NULL, 
	CONSTRAINT pk_borrow_fee PRIMARY KEY (id), 
	CONSTRAINT fk_borrow_fee_account_id_account FOREIGN KEY(account_id) REFERENCES account (id), 
	CONSTRAINT uq_borrow_fee_account_id_symbol_day UNIQUE (account_id, symbol, day)
);
CREATE TABLE margin_call (
	id INTEGER NOT NULL, 
	account_id INTEGER NOT NULL, 
	cycle_id INTEGER NOT NULL, 
	order_id INTEGER NOT NULL, 
	at DATETIME NOT NULL, 
	equity TEXT NOT NULL, 
	requirement TEXT NOT NULL, 
	reason TEXT NOT NULL, 
	CONSTRAINT pk_margin_call PRIMARY KEY (id), 
	CONSTRAINT fk_margin_call_account_id_account FOREIGN KEY(account_id) REFERENCES account (id), 
	CONSTRAINT fk_margin_call_cycle_id_cycle FOREIGN KEY(cycle_id) REFERENCES cycle (id), 
	CONSTRAINT fk_margin_call_order_id_order FOREIGN KEY(order_id) REFERENCES "order" (id), 
	CONSTRAINT uq_margin_call_order_id UNIQUE (order_id)
);
CREATE INDEX ix_margin_call_account_id ON margin_call (account_id);
CREATE TABLE verify_checkpoint (
	account_id INTEGER NOT NULL, 
	verified_at DATETIME NOT NULL, 
	watermarks TEXT NOT NULL, 
	state TEXT NOT NULL, 
	checksum VARCHAR NOT NULL, 
	CONSTRAINT pk_verify_checkpoint PRIMARY KEY (account_id), 
	CONSTRAINT fk_verify_checkpoint_account_id_account FOREIGN KEY(account_id) REFERENCES account (id)
);
CREATE TABLE hedge_pair (
	account_id INTEGER NOT NULL, 
	first_symbol VARCHAR NOT NULL, 
	second_symbol VARCHAR NOT NULL, 
	cycle_id INTEGER NOT NULL, 
	picked_at DATETIME NOT NULL, 
	CONSTRAINT pk_hedge_pair PRIMARY KEY (account_id), 
	CONSTRAINT fk_hedge_pair_account_id_account FOREIGN KEY(account_id) REFERENCES account (id), 
	CONSTRAINT fk_hedge_pair_cycle_id_cycle FOREIGN KEY(cycle_id) REFERENCES cycle (id)
);
CREATE TABLE strategy_judgement (
	id INTEGER NOT NULL, 
	strategy_id INTEGER NOT NULL, 
	judge_model VARCHAR NOT NULL, 
	judged_at DATETIME NOT NULL, 
	direction INTEGER NOT NULL, 
	indicators INTEGER NOT NULL, 
	exits INTEGER NOT NULL, 
	no_extra_rule INTEGER NOT NULL, 
	rationale TEXT NOT NULL, 
	CONSTRAINT pk_strategy_judgement PRIMARY KEY (id), 
	CONSTRAINT ck_strategy_judgement_direction CHECK (direction IN (0, 1)), 
	CONSTRAINT ck_strategy_judgement_indicators CHECK (indicators IN (0, 1)), 
	CONSTRAINT ck_strategy_judgement_exits CHECK (exits IN (0, 1)), 
	CONSTRAINT ck_strategy_judgement_no_extra_rule CHECK (no_extra_rule IN (0, 1)), 
	CONSTRAINT fk_strategy_judgement_strategy_id_strategy_code FOREIGN KEY(strategy_id) REFERENCES strategy_code (id), 
	CONSTRAINT uq_strategy_judgement_strategy_id_judge_model UNIQUE (strategy_id, judge_model)
);
CREATE INDEX ix_strategy_judgement_strategy_id ON strategy_judgement (strategy_id);
CREATE TABLE planted_news (
	id INTEGER NOT NULL, 
	market VARCHAR NOT NULL, 
	symbol VARCHAR NOT NULL, 
	published_at DATETIME NOT NULL, 
	title TEXT NOT NULL, 
	kind VARCHAR NOT NULL, 
	target VARCHAR, 
	CONSTRAINT pk_planted_news PRIMARY KEY (id), 
	CONSTRAINT ck_planted_news_market CHECK (market IN ('us', 'cn', 'crypto')), 
	CONSTRAINT uq_planted_news_market_symbol_published_at_title UNIQUE (market, symbol, published_at, title)
);
CREATE TABLE season (
	id INTEGER NOT NULL, 
	name VARCHAR NOT NULL, 
	manifest TEXT NOT NULL, 
	manifest_sha256 VARCHAR NOT NULL, 
	start_on DATE NOT NULL, 
	end_on DATE, 
	opened_at DATETIME NOT NULL, 
	closed_at DATETIME, 
	config TEXT NOT NULL, 
	config_path TEXT NOT NULL, 
	CONSTRAINT pk_season PRIMARY KEY (id), 
	CONSTRAINT uq_season_name UNIQUE (name)
);
CREATE TABLE cycle_digest (
	cycle_id INTEGER NOT NULL, 
	account_id INTEGER NOT NULL, 
	seq INTEGER NOT NULL, 
	prev VARCHAR NOT NULL, 
	digest VARCHAR NOT NULL, 
	CONSTRAINT pk_cycle_digest PRIMARY KEY (cycle_id), 
	CONSTRAINT fk_cycle_digest_account_id_account FOREIGN KEY(account_id) REFERENCES account (id), 
	CONSTRAINT uq_cycle_digest_account_id_seq UNIQUE (account_id, seq)
);
INSERT INTO alembic_version (version_num) VALUES ('0025');
